//! Deterministic randomness for UIDs and generated names: the core never asks the OS; each
//! request machine gets a seed from its shell (OS entropy in production, the simulator's RNG in
//! simulation).

/// SplitMix64: small, fast, and good enough for identifiers that must only be unique.
#[derive(Clone, Debug)]
pub struct Rng(u64);

/// The alphabet of kube's `utilrand.String` (no vowels, no confusable characters).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// An RNG seeded by `bytes` (FNV-1a), for identifiers that must differ by what they name
    /// and not draw on a machine's own RNG.
    pub fn of(bytes: &[u8]) -> Rng {
        Rng(bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A random (version 4) UUID, as kube's `uuid.NewUUID` writes them.
    pub fn uuid(&mut self) -> String {
        let hi = self.next_u64();
        let lo = self.next_u64();
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&hi.to_be_bytes());
        b[8..].copy_from_slice(&lo.to_be_bytes());
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = Vec::with_capacity(36);
        for (i, x) in b.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                out.push(b'-');
            }
            out.extend([HEX[usize::from(x >> 4)], HEX[usize::from(x & 0x0f)]]);
        }
        String::from_utf8(out).expect("hex digits are ASCII")
    }

    /// `n` random characters for `generateName` (kube appends 5).
    pub fn name_suffix(&mut self, n: usize) -> String {
        (0..n).map(|_| NAME_ALPHABET[(self.next_u64() % NAME_ALPHABET.len() as u64) as usize] as char).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn a_uuid_is_kubes_version_4_shape_of_its_two_draws() {
        let (mut r, mut draws) = (Rng::new(7), Rng::new(7));
        let id = r.uuid();
        let hex = format!("{:016x}{:016x}", draws.next_u64(), draws.next_u64());
        let variant = (hex.chars().nth(16).unwrap().to_digit(16).unwrap() & 0x3) | 0x8;
        let expected = format!("{}-{}-4{}-{variant:x}{}-{}", &hex[0..8], &hex[8..12], &hex[13..16], &hex[17..20], &hex[20..32]);
        assert_eq!(id, expected);
        assert_eq!(id.len(), 36);
    }
}
