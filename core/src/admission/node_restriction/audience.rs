//! NodeRestriction's audience check of a kubelet's token requests (kube v1.33's beta
//! `ServiceAccountNodeAudienceRestriction`, on by default): a node asks a token for at most
//! one audience, and only for one its pod's volumes name (a projected service account token's
//! `audience`, or a CSI driver's `tokenRequests`, through the pod's claims and their volumes,
//! and in-tree volumes as kube migrates them to CSI), unless the authorizer lets the node
//! `request-serviceaccounts-token-audience` on that audience (as a resource) for the service
//! account (by name).

use serde_json::Value;

use crate::admission::{Attributes, Found, Halt, Lookup};
use crate::authz;
use crate::meta;
use crate::status::quote;

/// The in-tree volume sources kube's CSI translation moves to a CSI driver, and the driver.
const MIGRATED: [(&str, &str); 7] = [
    ("awsElasticBlockStore", "ebs.csi.aws.com"),
    ("gcePersistentDisk", "pd.csi.storage.gke.io"),
    ("azureDisk", "disk.csi.azure.com"),
    ("azureFile", "file.csi.azure.com"),
    ("cinder", "cinder.csi.openstack.org"),
    ("vsphereVolume", "csi.vsphere.vmware.com"),
    ("portworxVolume", "pxd.portworx.com"),
];

/// The CSI driver of an in-tree source kube migrates (of a pod's volume or a volume's spec).
fn migrated(source: &Value) -> Option<&'static str> {
    MIGRATED.iter().find(|(key, _)| source.get(key).is_some_and(Value::is_object)).map(|(_, driver)| *driver)
}

/// The audience a token request asks for (`""`: the API server's), or kube's refusal of more
/// than one.
fn requested(request: &Value) -> Result<&str, String> {
    match meta::at(request, &["spec", "audiences"]).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
        [] => Ok(""),
        [one] => Ok(one.as_str().unwrap_or_default()),
        _ => Err("node may only request 0 or 1 audiences".into()),
    }
}

fn volumes(pod: &Value) -> &[Value] {
    meta::at(pod, &["spec", "volumes"]).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

/// Whether a projected volume has a service account token for `audience`.
fn projects(volume: &Value, audience: &str) -> bool {
    let sources = meta::at(volume, &["projected", "sources"]).and_then(Value::as_array).into_iter().flatten();
    sources.filter_map(|s| s.get("serviceAccountToken")).any(|t| t.get("audience").and_then(Value::as_str).unwrap_or_default() == audience)
}

/// Where a volume's CSI driver is to be found: through a claim, or named at once.
enum Driver<'a> {
    Claim(String),
    Named(&'a str),
}

/// kube's order: an ephemeral volume's claim (`<pod>-<volume>`), a claim, a CSI volume, an
/// in-tree volume kube migrates.
fn driver_of<'a>(pod: &Value, volume: &'a Value) -> Option<Driver<'a>> {
    if meta::at(volume, &["ephemeral", "volumeClaimTemplate"]).is_some_and(|t| !t.is_null()) {
        let name = meta::str_at(volume, &["name"]).unwrap_or_default();
        return Some(Driver::Claim(format!("{}-{name}", meta::name(pod))));
    }
    if let Some(claim) = volume.get("persistentVolumeClaim").filter(|c| c.is_object()) {
        return Some(Driver::Claim(meta::str_at(claim, &["claimName"]).unwrap_or_default().to_string()));
    }
    if let Some(csi) = volume.get("csi").filter(|c| c.is_object()) {
        return Some(Driver::Named(meta::str_at(csi, &["driver"]).unwrap_or_default()));
    }
    migrated(volume).map(Driver::Named)
}

/// What a lookup found: `Err` with the lister's not-found words when it is not there (or was
/// not looked up).
fn looked_up<'a>(found: &'a Found, lookup: Lookup, what: &str, name: &str) -> Result<&'a Value, String> {
    found.storage(&lookup).flatten().ok_or_else(|| format!("{what} {} not found", quote(name)))
}

/// The driver a claim's volume is served by (kube's `getCSIFromPVC`): none for a volume of
/// neither CSI nor a migrated in-tree source.
fn claim_driver<'a>(found: &'a Found, namespace: &str, claim: &str) -> Result<Option<&'a str>, String> {
    let pvc = looked_up(found, Lookup::Claim { namespace: namespace.into(), name: claim.into() }, "persistentvolumeclaim", claim)?;
    let volume = meta::str_at(pvc, &["spec", "volumeName"]).unwrap_or_default();
    let pv = looked_up(found, Lookup::Volume(volume.into()), "persistentvolume", volume)?;
    let spec = pv.get("spec").unwrap_or(&Value::Null);
    Ok(meta::str_at(spec, &["csi", "driver"]).or_else(|| migrated(spec)))
}

/// Whether a CSI driver asks tokens for `audience` (kube's `csiDriverHasAudience`).
fn driver_has(found: &Found, driver: &str, audience: &str) -> Result<bool, String> {
    let d = looked_up(found, Lookup::CsiDriver(driver.into()), "csidriver.storage.k8s.io", driver)?;
    let requests = meta::at(d, &["spec", "tokenRequests"]).and_then(Value::as_array).into_iter().flatten();
    Ok(requests.into_iter().any(|r| r.get("audience").and_then(Value::as_str).unwrap_or_default() == audience))
}

/// kube's `podReferencesAudience`: whether a volume of the pod names `audience`; else the
/// errors met reading what its volumes name.
fn referenced(pod: &Value, audience: &str, found: &Found) -> Result<bool, Vec<String>> {
    let namespace = meta::namespace(pod);
    let mut errors: Vec<String> = Vec::new();
    for volume in volumes(pod) {
        if projects(volume, audience) {
            return Ok(true);
        }
        let driver = match driver_of(pod, volume) {
            Some(Driver::Claim(claim)) => claim_driver(found, namespace, &claim),
            Some(Driver::Named(driver)) => Ok(Some(driver)),
            None => Ok(None),
        };
        match driver.and_then(|d| d.filter(|d| !d.is_empty()).map_or(Ok(false), |d| driver_has(found, d, audience))) {
            Ok(true) => return Ok(true),
            Ok(false) => {}
            Err(e) if !errors.contains(&e) => errors.push(e),
            Err(_) => {}
        }
    }
    match errors.is_empty() {
        true => Ok(false),
        false => Err(errors),
    }
}

/// What must be read to follow the pod's volumes to their drivers, given what was found (the
/// lookups already made are left out by the chain); nothing when a projected token names the
/// audience, or the request is refused before.
pub fn lookups(request: &Value, found: &Found) -> Vec<Lookup> {
    let (Ok(audience), Some(Some(pod))) = (requested(request), found.pod.as_ref()) else { return Vec::new() };
    if volumes(pod).iter().any(|v| projects(v, audience)) {
        return Vec::new();
    }
    let namespace = meta::namespace(pod);
    let mut out = Vec::new();
    for volume in volumes(pod) {
        let driver = match driver_of(pod, volume) {
            Some(Driver::Named(driver)) => driver,
            Some(Driver::Claim(claim)) => {
                let pvc = Lookup::Claim { namespace: namespace.into(), name: claim };
                let Some(Some(pvc_found)) = found.storage(&pvc) else {
                    out.push(pvc);
                    continue;
                };
                let pv = Lookup::Volume(meta::str_at(pvc_found, &["spec", "volumeName"]).unwrap_or_default().to_string());
                let Some(Some(pv_found)) = found.storage(&pv) else {
                    out.push(pv);
                    continue;
                };
                let spec = pv_found.get("spec").unwrap_or(&Value::Null);
                match meta::str_at(spec, &["csi", "driver"]).or_else(|| migrated(spec)) {
                    Some(driver) => driver,
                    None => continue,
                }
            }
            None => continue,
        };
        if !driver.is_empty() {
            out.push(Lookup::CsiDriver(driver.to_string()));
        }
    }
    out
}

/// kube's `validateNodeServiceAccountAudience`, for the token request `request` of the node's
/// pod `pod`: the refusal's words, or [`Halt::Ask`] for the authorization webhook's answer.
pub fn check(a: &Attributes, request: &Value, pod: &Value) -> Result<Result<(), String>, Halt> {
    let audience = match requested(request) {
        Ok(audience) => audience,
        Err(why) => return Ok(Err(why)),
    };
    match referenced(pod, audience, a.found) {
        Ok(true) => return Ok(Ok(())),
        Ok(false) => {}
        Err(errors) => return Ok(Err(format!("error validating audience {}: {}", quote(audience), authz::rbac::aggregate(&errors)))),
    }
    let q = authz::Attributes {
        version: "v1".into(),
        ..authz::Attributes::resource("request-serviceaccounts-token-audience", "", audience, "", a.namespace, a.name)
    };
    let decision = a.decide(&q)?;
    let (aq, user) = (quote(audience), &a.user.name);
    Ok(match (decision.allowed, decision.error.is_empty()) {
        (true, _) => Ok(()),
        (false, false) => {
            Err(format!("audience {aq} not found in pod spec volume, error authorizing {user} to request tokens for this audience: {}", decision.error))
        }
        (false, true) => Err(format!("audience {aq} not found in pod spec volume, {user} is not authorized to request tokens for this audience")),
    })
}
