//! batch/v1: jobs and cronjobs.

use serde_json::{Value, json};

use super::apps::{default_template, validate_template};
use super::{info, serve, status_subresource};
use crate::catalog::{FieldName, Lifecycle, Resource, ResourceInfo, Strategy, field};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};

pub fn resources() -> Vec<Resource> {
    let mut jobs = info("batch", "v1", "Job", "jobs", true);
    jobs.categories = crate::catalog::names(&["all"]);
    jobs.subresources = vec![status_subresource(&jobs)];
    vec![serve(jobs, Jobs), serve(cron_jobs_info(), CronJobs)]
}

fn cron_jobs_info() -> ResourceInfo {
    let mut cron = info("batch", "v1", "CronJob", "cronjobs", true);
    cron.short_names = crate::catalog::names(&["cj"]);
    cron.categories = crate::catalog::names(&["all"]);
    cron.subresources = vec![status_subresource(&cron)];
    cron
}

/// batch/v1beta1 cronjobs, behind `--runtime-config`.
pub fn cron_jobs_v1beta1() -> Resource {
    super::legacy::cron_jobs(&cron_jobs_info(), CronJobs)
}

const JOB_NAME_LABELS: [&str; 2] = ["job-name", "batch.kubernetes.io/job-name"];
const CONTROLLER_UID_LABELS: [&str; 2] = ["controller-uid", "batch.kubernetes.io/controller-uid"];

struct Jobs;

const JOB_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Status", "string", Describe::Text("Status of the job.")),
    Column::new("Completions", "string", Describe::Field("io.k8s.api.batch.v1.JobStatus", "succeeded")),
    Column::new("Duration", "string", Describe::Text("Time required to complete the job.")),
    Column::AGE,
    Column::CONTAINERS,
    Column::IMAGES,
    Column::new("Selector", "string", Describe::Field("io.k8s.api.batch.v1.JobSpec", "selector")).wide(),
];

fn has_condition(obj: &Value, ty: &str) -> bool {
    meta::at(obj, &["status", "conditions"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c.get("type").and_then(Value::as_str) == Some(ty) && c.get("status").and_then(Value::as_str) == Some("True"))
}

impl Strategy for Jobs {
    fn default(&self, obj: &mut Value) {
        let template_labels = meta::at(obj, &["spec", "template", "metadata", "labels"]).cloned();
        let spec = meta::object_at(obj, &["spec"]);
        if spec.get("completions").is_none() && spec.get("parallelism").is_none() {
            spec.insert("completions".into(), json!(1));
            spec.insert("parallelism".into(), json!(1));
        }
        spec.entry("parallelism").or_insert_with(|| json!(1));
        let per_index = spec.get("backoffLimitPerIndex").is_some();
        spec.entry("backoffLimit").or_insert_with(|| json!(if per_index { i32::MAX as i64 } else { 6 }));
        spec.entry("completionMode").or_insert_with(|| json!("NonIndexed"));
        spec.entry("suspend").or_insert_with(|| json!(false));
        let failure_policy = spec.get("podFailurePolicy").is_some();
        spec.entry("podReplacementPolicy").or_insert_with(|| json!(if failure_policy { "Failed" } else { "TerminatingOrFailed" }));
        if let Some(l) = template_labels.filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
            && meta::labels(obj).is_empty()
        {
            meta::set_meta(obj, "labels", l);
        }
        default_template(obj, &["spec", "template"]);
    }

    fn lifecycle(&self) -> Lifecycle {
        Lifecycle::StatusAndGeneration
    }

    fn finalize_create(&self, obj: &mut Value) {
        if meta::at(obj, &["spec", "manualSelector"]).and_then(Value::as_bool) == Some(true) {
            return;
        }
        let name = meta::name(obj).to_string();
        let uid = meta::uid(obj).to_string();
        let labels = meta::object_at(obj, &["spec", "template", "metadata", "labels"]);
        for l in JOB_NAME_LABELS {
            labels.entry(l).or_insert_with(|| json!(name));
        }
        for l in CONTROLLER_UID_LABELS {
            labels.entry(l).or_insert_with(|| json!(uid));
        }
        meta::object_at(obj, &["spec", "selector", "matchLabels"]).entry(CONTROLLER_UID_LABELS[1]).or_insert_with(|| json!(uid));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if meta::at(obj, &["spec", "manualSelector"]).and_then(Value::as_bool) != Some(true) {
            let sel = meta::at(obj, &["spec", "selector"]).cloned().unwrap_or(Value::Null);
            let generated = sel.get("matchExpressions").is_none()
                && sel.get("matchLabels").and_then(Value::as_object).is_some_and(|m| m.len() == 1 && m.contains_key(CONTROLLER_UID_LABELS[1]));
            if !generated {
                errs.push(FieldError::invalid("spec.selector", sel, "`selector` not auto-generated"));
            }
        }
        let supported = crate::validation::supported;
        supported(&mut errs, meta::at(obj, &["spec", "completionMode"]), "spec.completionMode", &["NonIndexed", "Indexed"]);
        let replacement: &[&str] = if meta::at(obj, &["spec", "podFailurePolicy"]).is_some() { &["Failed"] } else { &["Failed", "TerminatingOrFailed"] };
        supported(&mut errs, meta::at(obj, &["spec", "podReplacementPolicy"]), "spec.podReplacementPolicy", replacement);
        super::podspec::validate_template_selector(obj, &mut errs);
        errs.extend(validate_template(obj, &["spec", "template"], &["OnFailure", "Never"]));
        for f in ["parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"] {
            if let Some(n) = meta::at(obj, &["spec", f]).and_then(Value::as_i64)
                && (n < 0 || (f == "activeDeadlineSeconds" && n == 0))
            {
                let msg = if f == "activeDeadlineSeconds" { "must be greater than 0" } else { "must be greater than or equal to 0" };
                errs.push(FieldError::invalid(format!("spec.{f}"), json!(n), msg));
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        for (path, field) in [(&["spec", "selector"][..], "spec.selector"), (&["spec", "completions"][..], "spec.completions")] {
            errs.extend(crate::validation::immutable(new, old, path, field));
        }
        let suspended = meta::at(old, &["spec", "suspend"]).and_then(Value::as_bool) == Some(true);
        if !suspended {
            errs.extend(crate::validation::immutable(new, old, &["spec", "template"], "spec.template"));
        }
        errs
    }

    fn default_propagation(&self) -> &'static str {
        "Orphan"
    }

    fn columns(&self) -> &'static [Column] {
        JOB_COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let succeeded = table::int_at(obj, &["status", "succeeded"]);
        let completions = match meta::at(obj, &["spec", "completions"]).and_then(Value::as_i64) {
            Some(c) => format!("{succeeded}/{c}"),
            None => {
                let parallelism = table::int_at(obj, &["spec", "parallelism"]);
                if parallelism > 1 { format!("{succeeded}/1 of {parallelism}") } else { format!("{succeeded}/1") }
            }
        };
        let ts = |p: &[&str]| meta::str_at(obj, p).and_then(|s| s.parse::<jiff::Timestamp>().ok());
        let duration = match (ts(&["status", "startTime"]), ts(&["status", "completionTime"])) {
            (None, _) => String::new(),
            (Some(start), None) => table::human_duration(now.duration_since(start).as_secs()),
            (Some(start), Some(end)) => table::human_duration(end.duration_since(start).as_secs()),
        };
        let status = if has_condition(obj, "Complete") {
            "Complete"
        } else if has_condition(obj, "Failed") {
            "Failed"
        } else if meta::deletion_timestamp(obj).is_some() {
            "Terminating"
        } else if has_condition(obj, "Suspended") {
            "Suspended"
        } else if has_condition(obj, "FailureTarget") {
            "FailureTarget"
        } else if has_condition(obj, "SuccessCriteriaMet") {
            "SuccessCriteriaMet"
        } else {
            "Running"
        };
        let (containers, images) = table::containers_and_images(meta::at(obj, &["spec", "template", "spec"]));
        vec![
            json!(meta::name(obj)),
            json!(status),
            json!(completions),
            json!(duration),
            table::age(obj, now),
            containers,
            images,
            json!(table::selector_string(meta::at(obj, &["spec", "selector"]))),
        ]
    }

    fn selectable_fields(&self) -> &[FieldName] {
        const { &[field("status.successful")] }
    }

    fn field_path<'a>(&self, field: &'a str) -> &'a str {
        if field == "status.successful" { "status.succeeded" } else { field }
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        (field == "status.successful").then(|| table::int_at(obj, &["status", "succeeded"]).to_string())
    }
}

struct CronJobs;

const CRON_SPEC: &str = "io.k8s.api.batch.v1.CronJobSpec";
const CRON_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Schedule", "string", Describe::Field(CRON_SPEC, "schedule")),
    Column::new("Timezone", "string", Describe::Field(CRON_SPEC, "timeZone")),
    Column::new("Suspend", "boolean", Describe::Field(CRON_SPEC, "suspend")),
    Column::new("Active", "integer", Describe::Field("io.k8s.api.batch.v1.CronJobStatus", "active")),
    Column::new("Last Schedule", "string", Describe::Field("io.k8s.api.batch.v1.CronJobStatus", "lastScheduleTime")),
    Column::AGE,
    Column::CONTAINERS,
    Column::IMAGES,
    Column::new("Selector", "string", Describe::Field("io.k8s.api.batch.v1.JobSpec", "selector")).wide(),
];

impl Strategy for CronJobs {
    fn default(&self, obj: &mut Value) {
        let spec = meta::object_at(obj, &["spec"]);
        spec.entry("concurrencyPolicy").or_insert_with(|| json!("Allow"));
        spec.entry("suspend").or_insert_with(|| json!(false));
        spec.entry("successfulJobsHistoryLimit").or_insert_with(|| json!(3));
        spec.entry("failedJobsHistoryLimit").or_insert_with(|| json!(1));
        default_template(obj, &["spec", "jobTemplate", "spec", "template"]);
    }

    fn lifecycle(&self) -> Lifecycle {
        Lifecycle::StatusAndGeneration
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let schedule = meta::str_at(obj, &["spec", "schedule"]).unwrap_or_default();
        if schedule.is_empty() {
            errs.push(FieldError::required("spec.schedule", ""));
        } else if schedule.contains("TZ") {
            errs.push(FieldError::invalid("spec.schedule", json!(schedule), "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"));
        } else if let Err(e) = check_cron(schedule) {
            errs.push(FieldError::invalid("spec.schedule", json!(schedule), e));
        }
        if let Some(p) = meta::at(obj, &["spec", "concurrencyPolicy"])
            && !["Allow", "Forbid", "Replace"].contains(&p.as_str().unwrap_or_default())
        {
            errs.push(FieldError::not_supported("spec.concurrencyPolicy", p.clone(), &["Allow", "Forbid", "Replace"]));
        }
        errs.extend(validate_template(obj, &["spec", "jobTemplate", "spec", "template"], &["OnFailure", "Never"]));
        errs
    }

    fn columns(&self) -> &'static [Column] {
        CRON_COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let last = match meta::str_at(obj, &["status", "lastScheduleTime"]) {
            Some(t) => table::since(Some(t), now),
            None => "<none>".into(),
        };
        let suspend = match meta::at(obj, &["spec", "suspend"]).and_then(Value::as_bool) {
            Some(true) => "True",
            Some(false) => "False",
            None => "<unset>",
        };
        let active = meta::at(obj, &["status", "active"]).and_then(Value::as_array).map_or(0, Vec::len);
        let (containers, images) = table::containers_and_images(meta::at(obj, &["spec", "jobTemplate", "spec", "template", "spec"]));
        vec![
            json!(meta::name(obj)),
            json!(table::str_or(obj, &["spec", "schedule"], "")),
            json!(table::str_or(obj, &["spec", "timeZone"], "<none>")),
            json!(suspend),
            json!(active),
            json!(last),
            table::age(obj, now),
            containers,
            images,
            json!(table::selector_string(meta::at(obj, &["spec", "jobTemplate", "spec", "selector"]))),
        ]
    }
}

/// The cron syntax kube's CronJob controller accepts (robfig/cron standard parser).
fn check_cron(s: &str) -> Result<(), String> {
    const DESCRIPTORS: &[&str] = &["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"];
    if s.starts_with('@') {
        if DESCRIPTORS.contains(&s) || s.starts_with("@every ") {
            return Ok(());
        }
        return Err(format!("unrecognized descriptor: {s}"));
    }
    let fields: Vec<&str> = s.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!("expected exactly 5 fields, found {}: {s}", fields.len()));
    }
    const MONTHS: &[&str] = &["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
    const DAYS: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
    let bounds: [(u32, u32, &[&str]); 5] = [(0, 59, &[]), (0, 23, &[]), (1, 31, &[]), (1, 12, MONTHS), (0, 7, DAYS)];
    for (field, (lo, hi, names)) in fields.iter().zip(bounds) {
        for part in field.split(',') {
            let (range, step) = match part.split_once('/') {
                Some((r, st)) => (r, Some(st)),
                None => (part, None),
            };
            if let Some(st) = step
                && st.parse::<u32>().map_or(true, |n| n == 0)
            {
                return Err(format!("failed to parse int from {st}"));
            }
            if range == "*" || range == "?" {
                continue;
            }
            let value = |v: &str| -> Result<u32, String> {
                if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(v)) {
                    return Ok(i as u32 + lo);
                }
                let n: u32 = v.parse().map_err(|_| format!("failed to parse int from {v}"))?;
                if n < lo || n > hi {
                    return Err(format!("end of range ({n}) above maximum ({hi}): {part}"));
                }
                Ok(n)
            };
            match range.split_once('-') {
                Some((a, b)) => {
                    if value(a)? > value(b)? {
                        return Err(format!("beginning of range after end: {part}"));
                    }
                }
                None => {
                    value(range)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cron_syntax() {
        for ok in ["*/5 * * * *", "0 0 * * MON-FRI", "@hourly", "0 12 1,15 JAN *", "@every 1h"] {
            assert!(check_cron(ok).is_ok(), "{ok}");
        }
        for bad in ["* * * *", "61 * * * *", "@sometimes", "*/0 * * * *"] {
            assert!(check_cron(bad).is_err(), "{bad}");
        }
    }
}
