//! The simulation's one source of randomness: every choice of a run (the swarm options, fault
//! timing, client actions, request seeds) is drawn from it, so the seed replays the run.

use kapi_core::rand::Rng;

pub struct SimRng(Rng);

impl SimRng {
    pub fn new(seed: u64) -> SimRng {
        SimRng(Rng::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A number in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// A probability in `0..=max`, or exactly zero half of the time: swarm testing turns each
    /// fault off in some runs, so bugs that one fault hides show in the others.
    pub fn rate(&mut self, max: f64) -> f64 {
        if self.chance(0.5) { 0.0 } else { max * self.below(1001) as f64 / 1000.0 }
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}
