//! The clock the core is given: wall time at start plus monotonic time since, so `now` never
//! goes backwards while the process runs.

use std::sync::OnceLock;
use std::time::Instant;

use jiff::{SignedDuration, Timestamp};

static START: OnceLock<(Instant, Timestamp)> = OnceLock::new();

pub fn now() -> Timestamp {
    let (instant, wall) = START.get_or_init(|| (Instant::now(), Timestamp::now()));
    let elapsed = SignedDuration::try_from(instant.elapsed()).unwrap_or(SignedDuration::ZERO);
    wall.saturating_add(elapsed).unwrap_or(*wall)
}

/// The tokio instant at which the core's timestamp `t` comes.
pub fn instant_of(t: Timestamp) -> tokio::time::Instant {
    let ahead = t.duration_since(now());
    let ahead = std::time::Duration::try_from(ahead).unwrap_or(std::time::Duration::ZERO);
    tokio::time::Instant::now() + ahead
}

/// A random seed for a request machine.
pub fn seed() -> u64 {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).expect("the OS provides randomness");
    u64::from_le_bytes(b)
}
