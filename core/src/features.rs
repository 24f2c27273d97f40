//! `--feature-gates`: kube's switches of features not on by default, as kube-apiserver reads
//! the flag (`featuregate.Set`: `Name=bool` pairs, comma-separated, with its messages). kapi
//! knows the gates of the features it has; another name is refused as kube refuses one it
//! does not know.

/// The gates kapi has, each as kube v1.33 sets it by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    /// `MutatingAdmissionPolicy` (alpha, off): the MutatingAdmissionPolicy admission plugin runs.
    pub mutating_admission_policy: bool,
    /// `ServiceAccountNodeAudienceRestriction` (beta, on): NodeRestriction lets a node ask
    /// tokens only for the audiences its pods name.
    pub service_account_node_audience_restriction: bool,
}

impl Default for FeatureGates {
    fn default() -> FeatureGates {
        FeatureGates { mutating_admission_policy: false, service_account_node_audience_restriction: true }
    }
}

impl FeatureGates {
    /// Reads the flag's value; kube's error for a malformed pair or a gate kapi does not know.
    pub fn parse(flag: &str) -> Result<FeatureGates, String> {
        let mut gates = FeatureGates::default();
        for pair in flag.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((name, value)) = pair.split_once('=') else { return Err(format!("missing bool value for {pair}")) };
            let (name, value) = (name.trim(), value.trim());
            let on = match value {
                "1" | "t" | "T" | "TRUE" | "true" | "True" => true,
                "0" | "f" | "F" | "FALSE" | "false" | "False" => false,
                _ => return Err(format!("invalid value of {name}={value}, err: strconv.ParseBool: parsing {value:?}: invalid syntax")),
            };
            match name {
                "MutatingAdmissionPolicy" => gates.mutating_admission_policy = on,
                "ServiceAccountNodeAudienceRestriction" => gates.service_account_node_audience_restriction = on,
                _ => return Err(format!("unrecognized feature gate: {name}")),
            }
        }
        Ok(gates)
    }
}

#[cfg(test)]
mod tests {
    use super::FeatureGates;

    #[test]
    fn the_flag_is_read_with_kubes_messages() {
        assert_eq!(FeatureGates::parse(""), Ok(FeatureGates::default()));
        assert_eq!(FeatureGates::parse("MutatingAdmissionPolicy=true"), Ok(FeatureGates { mutating_admission_policy: true, ..FeatureGates::default() }));
        let off = FeatureGates { service_account_node_audience_restriction: false, ..FeatureGates::default() };
        assert_eq!(FeatureGates::parse("ServiceAccountNodeAudienceRestriction=false"), Ok(off));
        assert_eq!(FeatureGates::parse("MutatingAdmissionPolicy=true, MutatingAdmissionPolicy=0"), Ok(FeatureGates::default()));
        assert_eq!(FeatureGates::parse("MutatingAdmissionPolicy").unwrap_err(), "missing bool value for MutatingAdmissionPolicy");
        assert_eq!(
            FeatureGates::parse("MutatingAdmissionPolicy=yes").unwrap_err(),
            "invalid value of MutatingAdmissionPolicy=yes, err: strconv.ParseBool: parsing \"yes\": invalid syntax"
        );
        assert_eq!(FeatureGates::parse("Nope=true").unwrap_err(), "unrecognized feature gate: Nope");
    }
}
