//! The keys of service account tokens, as kube-apiserver reads them: the signing key
//! (`--service-account-signing-key-file`: an RSA or a P-256 EC private key, PEM: `RSA PRIVATE
//! KEY`, `EC PRIVATE KEY` or `PRIVATE KEY`) and the keys tokens are verified with
//! (`--service-account-key-file`: public keys, `PUBLIC KEY` or `RSA PUBLIC KEY`, or private
//! keys whose public halves count). Each key is known by kube's key id, the unpadded base64url
//! SHA-256 of its public key's DER (`SubjectPublicKeyInfo`). Signatures are deterministic
//! (RSA PKCS#1 v1.5; ECDSA with RFC 6979 nonces): the core signs without randomness.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey};
use rsa::pkcs1::{DecodeRsaPrivateKey, DecodeRsaPublicKey};
use rsa::signature::{SignatureEncoding, Signer, Verifier};
use rsa::traits::PublicKeyParts;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A private key tokens are signed with, and its key id.
#[derive(Clone, Debug)]
pub struct SigningKey {
    key: Private,
    pub kid: String,
}

#[derive(Clone, Debug)]
enum Private {
    Rsa(rsa::pkcs1v15::SigningKey<Sha256>),
    Ec(p256::ecdsa::SigningKey),
}

/// A public key tokens are verified with, and its key id.
#[derive(Clone, Debug)]
pub struct PublicKey {
    key: Public,
    pub kid: String,
}

#[derive(Clone, Debug)]
enum Public {
    Rsa(rsa::PublicKey),
    Ec(p256::ecdsa::VerifyingKey),
}

impl SigningKey {
    /// The first private key of a PEM file.
    pub fn from_pem(pem: &str) -> Result<SigningKey, String> {
        let key = blocks(pem).into_iter().find_map(|(label, block)| private(&label, &block).transpose()).unwrap_or(Err("no private key found".into()))?;
        let kid = key_id(&public_of(&key));
        Ok(SigningKey { key, kid })
    }

    /// The JWS algorithm of its signatures.
    pub fn algorithm(&self) -> &'static str {
        match self.key {
            Private::Rsa(_) => "RS256",
            Private::Ec(_) => "ES256",
        }
    }

    /// Its signature of `input` (for ES256, `r || s`, as JWS writes it).
    pub fn sign(&self, input: &[u8]) -> Vec<u8> {
        match &self.key {
            Private::Rsa(k) => k.sign(input).to_vec(),
            Private::Ec(k) => {
                let signature: p256::ecdsa::Signature = k.sign(input);
                signature.to_bytes().to_vec()
            }
        }
    }

    pub fn public(&self) -> PublicKey {
        PublicKey { key: public_of(&self.key), kid: self.kid.clone() }
    }
}

impl PublicKey {
    /// Every key of a PEM file (public keys, and the public halves of private keys).
    pub fn all_from_pem(pem: &str) -> Result<Vec<PublicKey>, String> {
        let mut keys = Vec::new();
        for (label, block) in blocks(pem) {
            let key = match label.as_str() {
                "PUBLIC KEY" => p256::ecdsa::VerifyingKey::from_public_key_pem(&block)
                    .map(Public::Ec)
                    .or_else(|_| rsa::PublicKey::from_public_key_pem(&block).map(Public::Rsa))
                    .map_err(|e| format!("invalid public key: {e}"))?,
                "RSA PUBLIC KEY" => Public::Rsa(rsa::PublicKey::from_pkcs1_pem(&block).map_err(|e| format!("invalid RSA public key: {e}"))?),
                other => match private(other, &block)? {
                    Some(private) => public_of(&private),
                    None => continue,
                },
            };
            keys.push(PublicKey { kid: key_id(&key), key });
        }
        if keys.is_empty() {
            return Err("data does not contain any valid RSA or ECDSA public keys".into());
        }
        Ok(keys)
    }

    /// A key of a JWKS (RFC 7517: `kty` `RSA` with `n` and `e`, or `EC` on `P-256` with `x` and
    /// `y`), known by its `kid`; `None` for a key of another type or curve, or one meant for
    /// another use or algorithm than signatures of RS256 or ES256.
    pub fn from_jwk(jwk: &Value) -> Option<PublicKey> {
        let text = |k: &str| jwk.get(k).and_then(Value::as_str);
        let bytes = |k: &str| text(k).and_then(|v| URL_SAFE_NO_PAD.decode(v.trim_end_matches('=')).ok());
        if text("use").is_some_and(|u| u != "sig") {
            return None;
        }
        let key = match (text("kty")?, text("alg")) {
            ("RSA", None | Some("RS256")) => {
                let (n, e) = (bytes("n")?, bytes("e")?);
                let n = rsa::BoxedUint::from_be_slice_vartime(&n);
                let e = rsa::BoxedUint::from_be_slice_vartime(&e);
                Public::Rsa(rsa::PublicKey::new(n, e).ok()?)
            }
            ("EC", None | Some("ES256")) if text("crv") == Some("P-256") => {
                let (x, y) = (bytes("x")?, bytes("y")?);
                if x.len() != 32 || y.len() != 32 {
                    return None;
                }
                let point = [&[4u8][..], &x, &y].concat();
                Public::Ec(p256::ecdsa::VerifyingKey::from_sec1_bytes(&point).ok()?)
            }
            _ => return None,
        };
        Some(PublicKey { key, kid: text("kid").unwrap_or_default().to_string() })
    }

    /// The JWS algorithm its signatures are made with.
    pub fn algorithm(&self) -> &'static str {
        match self.key {
            Public::Rsa(_) => "RS256",
            Public::Ec(_) => "ES256",
        }
    }

    /// Whether `signature` is this key's of `input`.
    pub fn verifies(&self, input: &[u8], signature: &[u8]) -> bool {
        match &self.key {
            Public::Rsa(k) => {
                rsa::pkcs1v15::Signature::try_from(signature).is_ok_and(|s| rsa::pkcs1v15::VerifyingKey::<Sha256>::new(k.clone()).verify(input, &s).is_ok())
            }
            Public::Ec(k) => p256::ecdsa::Signature::from_slice(signature).is_ok_and(|s| k.verify(input, &s).is_ok()),
        }
    }

    /// The key as a JWK (RFC 7517), as kube publishes it in its JWKS.
    pub fn jwk(&self) -> Value {
        let b64 = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
        match &self.key {
            Public::Rsa(k) => {
                let trimmed = |b: Box<[u8]>| b.iter().skip_while(|x| **x == 0).copied().collect::<Vec<u8>>();
                json!({"use": "sig", "kty": "RSA", "kid": self.kid, "alg": "RS256", "n": b64(&trimmed(k.n().to_be_bytes())), "e": b64(&trimmed(k.e().to_be_bytes()))})
            }
            Public::Ec(k) => {
                let point = k.to_sec1_point(false);
                let coordinate = |c: Option<&[u8]>| b64(c.unwrap_or_default());
                json!({"use": "sig", "kty": "EC", "kid": self.kid, "crv": "P-256", "alg": "ES256",
                    "x": coordinate(point.x().map(|x| x.as_slice())), "y": coordinate(point.y().map(|y| y.as_slice()))})
            }
        }
    }
}

/// The private key of a PEM block, `None` when the block holds something else.
fn private(label: &str, block: &str) -> Result<Option<Private>, String> {
    let key = match label {
        "RSA PRIVATE KEY" => {
            Private::Rsa(rsa::pkcs1v15::SigningKey::new(rsa::PrivateKey::from_pkcs1_pem(block).map_err(|e| format!("invalid RSA private key: {e}"))?))
        }
        "EC PRIVATE KEY" => Private::Ec(p256::SecretKey::from_sec1_pem(block).map_err(|e| format!("invalid EC private key (P-256): {e}"))?.into()),
        "PRIVATE KEY" => match p256::ecdsa::SigningKey::from_pkcs8_pem(block) {
            Ok(k) => Private::Ec(k),
            Err(_) => Private::Rsa(rsa::pkcs1v15::SigningKey::new(rsa::PrivateKey::from_pkcs8_pem(block).map_err(|e| format!("invalid private key: {e}"))?)),
        },
        _ => return Ok(None),
    };
    Ok(Some(key))
}

fn public_of(key: &Private) -> Public {
    match key {
        Private::Rsa(k) => Public::Rsa(k.as_ref().to_public_key()),
        Private::Ec(k) => Public::Ec(*k.verifying_key()),
    }
}

/// kube's key id: the SHA-256 of the public key's DER, unpadded base64url.
fn key_id(key: &Public) -> String {
    let der = match key {
        Public::Rsa(k) => k.to_public_key_der().map(|d| d.as_bytes().to_vec()),
        Public::Ec(k) => k.to_public_key_der().map(|d| d.as_bytes().to_vec()),
    };
    URL_SAFE_NO_PAD.encode(Sha256::digest(der.unwrap_or_default()))
}

/// The PEM blocks of `pem`: each label and the block, armour included.
fn blocks(pem: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = pem;
    while let Some(start) = rest.find("-----BEGIN ") {
        let after = &rest[start + "-----BEGIN ".len()..];
        let Some(label_end) = after.find("-----") else { break };
        let label = after[..label_end].to_string();
        let end_marker = format!("-----END {label}-----");
        let Some(end) = rest[start..].find(&end_marker) else { break };
        let stop = start + end + end_marker.len();
        out.push((label, rest[start..stop].to_string()));
        rest = &rest[stop..];
    }
    out
}
