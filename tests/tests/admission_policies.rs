//! Validating admission policies driven with kubectl, as kube's documentation shows them: a
//! policy whose parameters are custom resources (a CRD the test creates), bound to the
//! namespaces labelled for it, refusing a Deployment with too many replicas in kube's words;
//! a binding that only warns, whose warning kubectl prints; and a policy whose expression does
//! not compile, refused when it is created; the type check's warnings in a policy's status; a
//! policy asking the authorizer what a service account may do. Then a mutating admission policy (alpha: served
//! with `--runtime-config`, run with `--feature-gates`) annotating Deployments, as kube's e2e
//! test does.

use std::time::Duration;

use kapi_tests::{Kapi, eventually};

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: replicalimits.rules.example.com}
spec:
  group: rules.example.com
  scope: Namespaced
  names: {plural: replicalimits, singular: replicalimit, kind: ReplicaLimit}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          maxReplicas: {type: integer}
"#;

const POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replica-limit}
spec:
  failurePolicy: Fail
  paramKind: {apiVersion: rules.example.com/v1, kind: ReplicaLimit}
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  variables:
  - name: replicas
    expression: "object.spec.replicas"
  validations:
  - expression: "variables.replicas <= params.maxReplicas"
    messageExpression: "'replicas must be no greater than ' + string(params.maxReplicas)"
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replica-limit-test}
spec:
  policyName: replica-limit
  validationActions: [Deny]
  paramRef: {name: limit, parameterNotFoundAction: Deny}
  matchResources:
    namespaceSelector:
      matchLabels: {environment: test}
"#;

const LIMIT: &str = r#"
apiVersion: rules.example.com/v1
kind: ReplicaLimit
metadata: {name: limit, namespace: staging}
maxReplicas: 3
"#;

fn deployment(name: &str, replicas: u32) -> String {
    format!(
        r#"{{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {{"name": "{name}"}},
        "spec": {{"replicas": {replicas}, "selector": {{"matchLabels": {{"app": "{name}"}}}},
        "template": {{"metadata": {{"labels": {{"app": "{name}"}}}}, "spec": {{"containers": [{{"name": "c", "image": "nginx"}}]}}}}}}}}"#
    )
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_policy_with_custom_resource_params_refuses_with_kubectl() {
    let k = Kapi::start();
    k.kubectl_in(&["apply", "-f", "-"], CRD);
    assert!(eventually(Duration::from_secs(30), || k.kubectl(&["get", "replicalimits", "-A"]).status.success()), "the CRD is served");
    k.kubectl_in(&["create", "namespace", "staging"], "");
    k.kubectl_in(&["label", "namespace", "staging", "environment=test"], "");
    k.kubectl_in(&["create", "namespace", "other"], "");
    k.kubectl_in(&["apply", "-f", "-"], POLICY);

    // The binding's parameter is missing, and it says to deny then.
    let out = k.kubectl_with_input(&["create", "-n", "staging", "-f", "-"], &deployment("web", 5));
    assert!(!out.status.success());
    assert!(
        // A 422 with its cause, as kubectl prints it.
        stderr(&out).contains(
            "The deployments \"web\" is invalid: : ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-test' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
        ),
        "{}",
        stderr(&out)
    );

    k.kubectl_in(&["apply", "-f", "-"], LIMIT);
    let out = k.kubectl_with_input(&["create", "-n", "staging", "-f", "-"], &deployment("web", 5));
    assert!(!out.status.success());
    assert!(
        // The validation's reason, Forbidden: a 403.
        stderr(&out).contains(
            "Error from server (Forbidden): error when creating \"STDIN\": deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-test' denied request: replicas must be no greater than 3"
        ),
        "{}",
        stderr(&out)
    );
    k.kubectl_in(&["create", "-n", "staging", "-f", "-"], &deployment("web", 2));
    // Namespaces the binding does not select are not limited.
    k.kubectl_in(&["create", "-n", "other", "-f", "-"], &deployment("web", 5));
    // Nor is a scale beyond the limit through the scale subresource, which the rules do not name.
    let out = k.kubectl(&["scale", "-n", "staging", "deployment/web", "--replicas=4"]);
    assert!(out.status.success(), "{}", stderr(&out));

    // A binding that warns lets the write through and kubectl prints the warning.
    let warn = POLICY
        .split("---")
        .nth(1)
        .unwrap()
        .replace("replica-limit-test", "replica-limit-warn")
        .replace("[Deny]", "[Warn]")
        .replace("environment: test", "kubernetes.io/metadata.name: other");
    let warn =
        warn.replace("paramRef: {name: limit, parameterNotFoundAction: Deny}", "paramRef: {name: limit, namespace: staging, parameterNotFoundAction: Deny}");
    k.kubectl_in(&["apply", "-f", "-"], &warn);
    let out = k.kubectl_with_input(&["create", "-n", "other", "-f", "-"], &deployment("wide", 7));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "Warning: Validation failed for ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-warn': replicas must be no greater than 3"
        ),
        "{}",
        stderr(&out)
    );

    // kubectl lists them with kube's columns.
    let listed = String::from_utf8(k.kubectl(&["get", "validatingadmissionpolicybindings"]).stdout).unwrap();
    assert!(listed.starts_with("NAME"), "{listed}");
    assert!(listed.contains("replica-limit-test   replica-limit   */limit"), "{listed}");

    // An expression that does not compile is refused when the policy is created.
    let broken =
        POLICY.split("---").next().unwrap().replace("replica-limit}", "broken}").replace("variables.replicas <= params.maxReplicas", "variables.replicas <=");
    let out = k.kubectl_with_input(&["apply", "-f", "-"], &broken);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("spec.validations[0].expression: Invalid value: \"variables.replicas <=\": compilation failed: ERROR: <input>:1:"),
        "{}",
        stderr(&out)
    );

    // The policy status controller type checks each policy against the kinds it matches: the
    // custom resource params and the variable type; a confusion of types is warned of.
    let status = |name: &str| String::from_utf8(k.kubectl(&["get", "validatingadmissionpolicy", name, "-o", "jsonpath={.status}"]).stdout).unwrap();
    assert!(eventually(Duration::from_secs(30), || status("replica-limit") == r#"{"observedGeneration":1,"typeChecking":{}}"#), "{}", status("replica-limit"));
    let confused = POLICY
        .split("---")
        .next()
        .unwrap()
        .replace("replica-limit}", "confused}")
        .replace("variables.replicas <= params.maxReplicas", "variables.replicas <= string(params.maxReplicas)");
    k.kubectl_in(&["apply", "-f", "-"], &confused);
    let warning = || {
        let out = k.kubectl(&["get", "validatingadmissionpolicy", "confused", "-o", "jsonpath={.status.typeChecking.expressionWarnings[0].warning}"]);
        String::from_utf8(out.stdout).unwrap()
    };
    let want = "apps/v1, Kind=Deployment: ERROR: <input>:1:20: found no matching overload for '_<=_' applied to '(int, string)'";
    assert!(eventually(Duration::from_secs(30), || warning().starts_with(want)), "{}", warning());
}

const DEPLOYER: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: deployer-may}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - expression: "authorizer.serviceAccount(request.namespace, 'deployer').group('').resource('configmaps').namespace(request.namespace).check('create').allowed()"
    message: the deployer service account may not create configmaps here
  - expression: "authorizer.requestResource.check('create').allowed()"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: deployer-may}
spec:
  policyName: deployer-may
  validationActions: [Deny]
"#;

#[test]
fn a_policy_asks_the_authorizer_what_a_service_account_may_do_with_kubectl() {
    let k = Kapi::start();
    k.kubectl_in(&["apply", "-f", "-"], DEPLOYER);
    let create = || k.kubectl(&["create", "configmap", "settings", "--from-literal=a=b"]);
    // RBAC gives the service account nothing: refused.
    assert!(
        eventually(Duration::from_secs(30), || {
            stderr(&create()).contains(
            "configmaps \"settings\" is forbidden: ValidatingAdmissionPolicy 'deployer-may' with binding 'deployer-may' denied request: the deployer service account may not create configmaps here"
        )
        }),
        "{}",
        stderr(&create())
    );
    k.kubectl_in(&["create", "rolebinding", "deployer-edits", "--clusterrole=edit", "--serviceaccount=default:deployer"], "");
    assert!(eventually(Duration::from_secs(30), || create().status.success()), "{}", stderr(&create()));
}

const MUTATING: &str = r#"
apiVersion: admissionregistration.k8s.io/v1alpha1
kind: MutatingAdmissionPolicy
metadata: {name: annotate}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{annotations: {"mutated-by": "admission-policy"}}}
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: "add", path: "/spec/template/metadata/labels/" + jsonpatch.escapeKey("example.com/tier"), value: "web"}]
---
apiVersion: admissionregistration.k8s.io/v1alpha1
kind: MutatingAdmissionPolicyBinding
metadata: {name: annotate-test}
spec:
  policyName: annotate
  matchResources:
    namespaceSelector:
      matchLabels: {environment: test}
"#;

#[test]
fn a_mutating_policy_annotates_deployments_with_kubectl() {
    // Off by default: neither served nor run.
    let k = Kapi::start();
    let out = k.kubectl_with_input(&["apply", "-f", "-"], MUTATING);
    assert!(!out.status.success() && stderr(&out).contains("no matches for kind \"MutatingAdmissionPolicy\""), "{}", stderr(&out));
    drop(k);

    let k = Kapi::start_with(&["--runtime-config=admissionregistration.k8s.io/v1alpha1=true", "--feature-gates=MutatingAdmissionPolicy=true"]);
    k.kubectl_in(&["apply", "-f", "-"], MUTATING);
    k.kubectl_in(&["create", "namespace", "staging"], "");
    k.kubectl_in(&["label", "namespace", "staging", "environment=test"], "");
    k.kubectl_in(&["create", "namespace", "other"], "");
    k.kubectl_in(&["create", "-n", "staging", "-f", "-"], &deployment("web", 1));
    k.kubectl_in(&["create", "-n", "other", "-f", "-"], &deployment("web", 1));
    let annotation = |ns: &str| {
        let out = k.kubectl(&["get", "deployment", "web", "-n", ns, "-o", "jsonpath={.metadata.annotations.mutated-by}/{.spec.template.metadata.labels}"]);
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(annotation("staging"), r#"admission-policy/{"app":"web","example.com/tier":"web"}"#);
    assert_eq!(annotation("other"), r#"/{"app":"web"}"#);

    // kubectl lists them with kube's columns.
    let listed = String::from_utf8(k.kubectl(&["get", "mutatingadmissionpolicies"]).stdout).unwrap();
    assert!(listed.starts_with("NAME       MUTATIONS   PARAMKIND   AGE"), "{listed}");
    assert!(listed.contains("annotate   2           <unset>"), "{listed}");
}
