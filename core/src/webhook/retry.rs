//! kube's retries of a call made through its generic webhook client (`GenericWebhook`, as the
//! authentication and authorization webhooks and ImagePolicyWebhook's backend are called):
//! `WithExponentialBackoff` tries up to five times;
//! between tries it waits the configured first wait, then each wait 1.5 times the one before,
//! each lengthened by up to 20% at random (`wait.Backoff{Factor: 1.5, Jitter: 0.2, Steps: 5}`).
//! Only a transient failure is tried again (`DefaultShouldRetry`); the call's answer is its
//! last try's.

use jiff::SignedDuration;
use serde_json::Value;

use super::WebhookAnswer;
use crate::rand::Rng;

/// How many times a call is tried at most.
pub const TRIES: u32 = 5;

/// The first wait of the authentication and authorization webhooks' retries (kube's
/// `DefaultAuthWebhookRetryBackoff`).
pub const AUTH_WEBHOOK_FIRST_WAIT: SignedDuration = SignedDuration::from_millis(500);

/// The tries of one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The wait before the next try, before jitter.
    wait: SignedDuration,
    /// Tries left, the one under way included.
    steps: u32,
}

impl Backoff {
    /// A call's tries, the first wait `first`.
    pub fn new(first: SignedDuration) -> Backoff {
        Backoff { wait: first, steps: TRIES }
    }

    /// After a try answered `answer`: how long to wait before trying again, or `None` when
    /// the answer is the call's (it is not a transient failure, or it was the last try).
    pub fn again(&mut self, answer: &Result<WebhookAnswer, String>, rng: &mut Rng) -> Option<SignedDuration> {
        if self.steps <= 1 || !transient(answer) {
            return None;
        }
        self.steps -= 1;
        let wait = self.wait.as_nanos() as f64;
        self.wait = SignedDuration::from_nanos((wait * 1.5) as i64);
        let fraction = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        Some(SignedDuration::from_nanos((wait + fraction * 0.2 * wait) as i64))
    }
}

/// Whether kube's `DefaultShouldRetry` tries again after `answer`, by the error client-go
/// makes of it: an internal error or a timeout (by its reason, or by its code when the reason
/// is none of kube's), too many requests (by its reason or its code), or a delay asked for (a
/// `ServerTimeout` with details, or `retryAfterSeconds`). Of an answer that is not a failed
/// `Status`, client-go's error follows the code alone: any 5xx but 503, a 429. Of the failures
/// to get an answer, a connection reset by the peer (`IsConnectionReset`), in the words of
/// the shell's client or Go's; a refused connection or a timeout is not tried again. kapi does
/// not read a `Retry-After` header.
pub fn transient(answer: &Result<WebhookAnswer, String>) -> bool {
    let answer = match answer {
        Ok(answer) => answer,
        Err(why) => return why.to_ascii_lowercase().contains("connection reset by peer"),
    };
    if answer.succeeded() {
        return false;
    }
    let status: Option<Value> = serde_json::from_slice(&answer.body).ok();
    let failed = |s: &Value| s.get("kind").and_then(Value::as_str) == Some("Status") && s.get("status").and_then(Value::as_str) == Some("Failure");
    let Some(status) = status.filter(failed) else {
        return answer.status == 429 || (answer.status >= 500 && answer.status != 503);
    };
    let reason = status.get("reason").and_then(Value::as_str).unwrap_or_default();
    let code = status.get("code").and_then(Value::as_i64).unwrap_or(0);
    // kube's knownReasons, which leave `Unknown` out.
    let known = reason != "Unknown" && !crate::status::known_reason(reason).is_empty();
    let details = status.get("details").filter(|d| d.is_object());
    let delay = details.and_then(|d| d.get("retryAfterSeconds")).and_then(Value::as_i64).is_some_and(|s| s > 0);
    matches!(reason, "InternalError" | "Timeout" | "TooManyRequests")
        || (!known && matches!(code, 500 | 504))
        || code == 429
        || (reason == "ServerTimeout" && details.is_some())
        || delay
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use serde_json::json;

    use super::*;

    fn answer(status: u16, body: Value) -> Result<WebhookAnswer, String> {
        Ok(WebhookAnswer { status, body: Bytes::from(body.to_string()), content_type: "application/json".into() })
    }

    #[test]
    fn only_transient_failures_are_tried_again() {
        for (a, again) in [
            (answer(500, json!("boom")), true),
            (answer(502, json!("bad gateway")), true),
            (answer(504, json!("")), true),
            (answer(429, json!("")), true),
            (answer(503, json!("")), false),
            (answer(403, json!("")), false),
            (answer(200, json!({"status": {"allowed": true}})), false),
            (Err("dial tcp 127.0.0.1:1: connect: connection refused".into()), false),
            // A connection the webhook reset, as Go and as hyper word it.
            (Err("Post \"https://127.0.0.1:1/\": read tcp 127.0.0.1:2->127.0.0.1:1: read: connection reset by peer".into()), true),
            (Err("Post \"https://127.0.0.1:1/\": connection error: Connection reset by peer (os error 104)".into()), true),
            (Err("Post \"https://127.0.0.1:1/\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)".into()), false),
            // A failed Status by its reason, its code when the reason is not kube's, or a delay.
            (answer(400, json!({"kind": "Status", "status": "Failure", "reason": "TooManyRequests", "code": 400})), true),
            (answer(500, json!({"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 500})), false),
            (answer(400, json!({"kind": "Status", "status": "Failure", "reason": "Mine", "code": 504})), true),
            (answer(400, json!({"kind": "Status", "status": "Failure", "reason": "Unknown", "code": 500})), true),
            (answer(400, json!({"kind": "Status", "status": "Failure", "reason": "Conflict", "code": 429})), true),
            (answer(400, json!({"kind": "Status", "status": "Failure", "reason": "ServerTimeout", "details": {}})), true),
            (answer(400, json!({"kind": "Status", "status": "Failure", "reason": "ServerTimeout"})), false),
            (answer(503, json!({"kind": "Status", "status": "Failure", "reason": "ServiceUnavailable", "details": {"retryAfterSeconds": 2}})), true),
            // Without its kind, a body is no Status: the code alone counts.
            (answer(400, json!({"status": "Failure", "reason": "TooManyRequests"})), false),
        ] {
            assert_eq!(transient(&a), again, "{a:?}");
        }
    }

    #[test]
    fn five_tries_with_waits_growing_by_half_and_a_fifth_of_jitter() {
        let (mut b, mut rng, boom) = (Backoff::new(SignedDuration::from_millis(500)), Rng::new(3), answer(500, json!("boom")));
        let waits: Vec<SignedDuration> = std::iter::from_fn(|| b.again(&boom, &mut rng)).collect();
        assert_eq!(waits.len(), TRIES as usize - 1);
        for (wait, base) in waits.iter().zip([500.0, 750.0, 1125.0, 1687.5]) {
            let ms = wait.as_secs_f64() * 1000.0;
            assert!(ms >= base && ms <= base * 1.2, "{waits:?}");
        }
        assert_eq!(Backoff::new(SignedDuration::from_millis(500)).again(&answer(403, json!("")), &mut rng), None);
    }
}
