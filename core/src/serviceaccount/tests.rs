use jiff::Timestamp;
use serde_json::{Value, json};

use super::keys::{PublicKey, SigningKey};
use super::{Binding, TokenConfig, jwt};

const RSA_KEY: &str = include_str!("../../../testdata/serviceaccount/rsa.key");
const RSA_PUB: &str = include_str!("../../../testdata/serviceaccount/rsa.pub");

fn ec_key() -> String {
    rcgen::KeyPair::generate().unwrap().serialize_pem()
}

fn config(key: &SigningKey, issuer: &str) -> TokenConfig {
    TokenConfig {
        issuers: vec![issuer.into()],
        audiences: vec![issuer.into()],
        signing_key: key.clone(),
        public_keys: vec![key.public()],
        max_expiration: None,
        extend_expiration: true,
        jwks_uri: None,
    }
}

#[test]
fn tokens_are_signed_and_verified_with_rsa_and_ec_keys() {
    for (pem, alg) in [(RSA_KEY.to_string(), "RS256"), (ec_key(), "ES256")] {
        let key = SigningKey::from_pem(&pem).unwrap();
        assert_eq!(key.algorithm(), alg);
        let claims = json!({"sub": "system:serviceaccount:default:robot", "aud": ["x"], "kubernetes.io": {"serviceaccount": {"uid": "u", "name": "robot"}}});
        let token = jwt::sign(&key, &claims);
        assert_eq!(jwt::sign(&key, &claims), token, "signatures are deterministic");
        assert!(jwt::is_jwt(&token));
        let header: Value =
            serde_json::from_slice(&base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, token.split('.').next().unwrap()).unwrap())
                .unwrap();
        assert_eq!(header, json!({"alg": alg, "kid": key.kid}));
        let verified = jwt::verify(&token, &[key.public()]).unwrap();
        assert_eq!(Value::Object(verified), claims);
        // Another key, or a changed token, does not verify.
        let other = SigningKey::from_pem(&ec_key()).unwrap();
        assert_eq!(jwt::verify(&token, &[other.public()]).unwrap_err(), "invalid signature");
        let mut parts: Vec<&str> = token.split('.').collect();
        let forged = base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, br#"{"sub":"system:admin"}"#);
        parts[1] = &forged;
        assert_eq!(jwt::verify(&parts.join("."), &[key.public()]).unwrap_err(), "invalid signature");
    }
    assert!(!jwt::is_jwt("abc.def.ghi") && !jwt::is_jwt("static-token"));
}

#[test]
fn public_keys_come_from_public_and_private_pem_blocks_with_kubes_key_ids() {
    let from_private = SigningKey::from_pem(RSA_KEY).unwrap();
    let keys = PublicKey::all_from_pem(&format!("{RSA_PUB}\n{}", ec_key())).unwrap();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0].kid, from_private.kid, "the key id is the public key's, whichever half it is read from");
    assert_eq!(keys[0].jwk()["e"], "AQAB");
    assert_eq!(keys[1].jwk()["crv"], "P-256");
    assert!(PublicKey::all_from_pem("nothing").is_err());
    assert!(SigningKey::from_pem(RSA_PUB).is_err());
}

#[test]
fn claims_and_discovery_documents_are_kubes() {
    let key = SigningKey::from_pem(&ec_key()).unwrap();
    let c = config(&key, "https://kubernetes.default.svc.cluster.local");
    let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let binding = Binding { pod: Some(("web".into(), "p-uid".into())), node: Some(("n1".into(), "n-uid".into())), secret: None };
    let claims = c.claims("default", "robot", "sa-uid", &binding, &["api".to_string()], now, 3600, Some(3607), "j-1");
    assert_eq!(
        claims,
        json!({"aud": ["api"], "exp": now.as_second() + 3600, "iat": now.as_second(), "iss": "https://kubernetes.default.svc.cluster.local", "jti": "j-1",
            "kubernetes.io": {"namespace": "default", "node": {"name": "n1", "uid": "n-uid"}, "pod": {"name": "web", "uid": "p-uid"},
                "serviceaccount": {"name": "robot", "uid": "sa-uid"}, "warnafter": now.as_second() + 3607},
            "nbf": now.as_second(), "sub": "system:serviceaccount:default:robot"})
    );
    assert_eq!(
        c.openid_configuration().unwrap(),
        "{\"issuer\":\"https://kubernetes.default.svc.cluster.local\",\"jwks_uri\":\"https://kubernetes.default.svc.cluster.local/openid/v1/jwks\",\"response_types_supported\":[\"id_token\"],\"subject_types_supported\":[\"public\"],\"id_token_signing_alg_values_supported\":[\"ES256\"]}"
    );
    let jwks: Value = serde_json::from_str(&c.jwks()).unwrap();
    assert_eq!(jwks["keys"][0]["kid"], key.kid);
    assert!(c.jwks().starts_with("{\"keys\":[{\"use\":\"sig\",\"kty\":\"EC\",\"kid\":"));
    // An issuer that is no https URL gives no place for the keys, unless one is configured.
    assert_eq!(config(&key, "kapi").openid_configuration(), None);
    let with_uri = TokenConfig { jwks_uri: Some("https://example.com/keys".into()), ..config(&key, "kapi") };
    assert!(with_uri.openid_configuration().unwrap().contains("\"jwks_uri\":\"https://example.com/keys\""));
}
