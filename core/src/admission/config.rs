//! `--admission-control-config-file`: an `AdmissionConfiguration` (`apiserver.config.k8s.io/v1`,
//! or the older `apiserver.k8s.io/v1alpha1`) giving plugins their configuration, embedded or
//! in a file of its own, decoded strictly as kube decodes it. The shell reads the files; each
//! plugin decodes its own part.

use crate::config_file::{self, Decoder};

const VERSIONS: [&str; 2] = ["apiserver.config.k8s.io/v1", "apiserver.k8s.io/v1alpha1"];
const SCHEME: &str = "k8s.io/apiserver/pkg/server/options/admission.go:50";

/// Where a plugin's configuration is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Embedded in the file (`configuration`), as JSON.
    Embedded(Vec<u8>),
    /// In a file of its own (`path`, as written: relative to the configuration file's folder).
    Path(String),
}

/// Each plugin's configuration, the first entry naming it (as kube takes it); entries with
/// neither `configuration` nor `path` give none.
pub fn plugin_sources(data: &[u8]) -> Result<Vec<(String, Source)>, String> {
    let tree = config_file::read(data, "AdmissionConfiguration", &VERSIONS, SCHEME)?;
    let mut d = Decoder::new(&tree);
    let root = d.root(&tree, "AdmissionConfiguration", &["apiVersion", "kind", "plugins"]);
    let mut out: Vec<(String, Source)> = Vec::new();
    for (at, item) in d.items(&root, "plugins", "[]AdmissionPluginConfiguration") {
        let plugin = d.object(Some(item), at, "AdmissionConfiguration", "AdmissionPluginConfiguration", &["name", "path", "configuration"]);
        let name = d.string(&plugin, "name");
        let path = d.string(&plugin, "path");
        let embedded = item.get("configuration").filter(|c| !c.is_null()).map(|c| serde_json::to_vec(c).expect("JSON values serialize"));
        let source = match (embedded, path.is_empty()) {
            (Some(json), _) => Source::Embedded(json),
            (None, false) => Source::Path(path),
            (None, true) => continue,
        };
        if !out.iter().any(|(n, _)| *n == name) {
            out.push((name, source));
        }
    }
    d.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn embedded(v: serde_json::Value) -> Source {
        Source::Embedded(serde_json::to_vec(&v).unwrap())
    }

    #[test]
    fn plugins_get_their_first_entry_embedded_or_by_path() {
        let file = b"apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration:\n    kind: PodSecurityConfiguration\n- name: PodSecurity\n  path: ignored.yaml\n- name: EventRateLimit\n  path: limits.yaml\n- name: Empty\n";
        let sources = plugin_sources(file).unwrap();
        assert_eq!(
            sources,
            [
                ("PodSecurity".to_string(), embedded(serde_json::json!({"kind": "PodSecurityConfiguration"}))),
                ("EventRateLimit".to_string(), Source::Path("limits.yaml".into())),
            ]
        );
        let unknown = plugin_sources(b"apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins: [{name: X, pth: y}]\n");
        assert_eq!(unknown.unwrap_err(), "strict decoding error: unknown field \"plugins[0].pth\"");
        let v1beta1 = plugin_sources(b"apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AdmissionConfiguration\n").unwrap_err();
        assert!(v1beta1.starts_with("no kind \"AdmissionConfiguration\" is registered for version \"apiserver.config.k8s.io/v1beta1\""), "{v1beta1}");
    }
}
