//! Response compression as kube-apiserver's `APIResponseCompression` does it: a client whose
//! `Accept-Encoding` lists the token `gzip` gets a resource or discovery response gzip-compressed
//! (level 1) once its body passes 128 KiB; smaller bodies, watches and other endpoints go out
//! as they are. The body is held until it passes the threshold or ends, so a streamed list is
//! compressed from its first byte or not at all, and memory stays one threshold's worth.

use std::collections::VecDeque;
use std::io::Write;

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;

use super::Effect;
use super::respond::Head;

/// kube's `defaultGzipThresholdBytes`: bodies up to this size are not compressed.
pub const GZIP_THRESHOLD_BYTES: usize = 128 * 1024;

/// Whether an `Accept-Encoding` header asks for gzip, as kube reads it: one of its
/// comma-separated entries, trimmed, is exactly `gzip` (so `gzip;q=0.5` is not).
pub fn accepts_gzip(accept_encoding: Option<&str>) -> bool {
    accept_encoding.is_some_and(|v| v.split(',').any(|token| token.trim() == "gzip"))
}

/// The response of one request on its way out: the head and the body's first bytes held until
/// the body passes [`GZIP_THRESHOLD_BYTES`] (then compressed from there on) or ends.
pub struct Compressor {
    state: State,
}

enum State {
    /// No head yet, or the head and the body so far, under the threshold.
    Holding {
        head: Option<Head>,
        body: Vec<Bytes>,
        len: usize,
    },
    Gzip(GzEncoder<Vec<u8>>),
    /// The response went out uncompressed; what follows passes through.
    Plain,
}

impl Default for Compressor {
    fn default() -> Self {
        Compressor { state: State::Holding { head: None, body: Vec::new(), len: 0 } }
    }
}

impl Compressor {
    /// Takes the machine's next response effect and queues what the shell writes in its place.
    pub fn pass(&mut self, effect: Effect, out: &mut VecDeque<Effect>) {
        match (&mut self.state, effect) {
            (State::Holding { head, .. }, Effect::Respond(h)) => *head = Some(h),
            (State::Holding { body, len, .. }, Effect::Body(b)) => {
                *len += b.len();
                body.push(b);
                if *len > GZIP_THRESHOLD_BYTES {
                    self.start_gzip(out);
                }
            }
            (State::Holding { head, body, .. }, Effect::End) => {
                out.extend(head.take().map(Effect::Respond));
                out.extend(body.drain(..).map(Effect::Body));
                out.push_back(Effect::End);
                self.state = State::Plain;
            }
            (State::Gzip(gz), Effect::Body(b)) => {
                gz.write_all(&b).expect("writing to memory cannot fail");
                let compressed = std::mem::take(gz.get_mut());
                if !compressed.is_empty() {
                    out.push_back(Effect::Body(Bytes::from(compressed)));
                }
            }
            (State::Gzip(_), Effect::End) => {
                let State::Gzip(gz) = std::mem::replace(&mut self.state, State::Plain) else { unreachable!() };
                let rest = gz.finish().expect("writing to memory cannot fail");
                if !rest.is_empty() {
                    out.push_back(Effect::Body(Bytes::from(rest)));
                }
                out.push_back(Effect::End);
            }
            (_, other) => out.push_back(other),
        }
    }

    /// The body passed the threshold: the head goes out marked gzip, the held body compressed.
    fn start_gzip(&mut self, out: &mut VecDeque<Effect>) {
        let State::Holding { head, body, .. } = std::mem::replace(&mut self.state, State::Plain) else { return };
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        if let Some(head) = head {
            out.push_back(Effect::Respond(head.with("Content-Encoding", "gzip").with("Vary", "Accept-Encoding")));
        }
        for b in body {
            gz.write_all(&b).expect("writing to memory cannot fail");
        }
        let compressed = std::mem::take(gz.get_mut());
        if !compressed.is_empty() {
            out.push_back(Effect::Body(Bytes::from(compressed)));
        }
        self.state = State::Gzip(gz);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn run(chunks: &[&[u8]]) -> (Head, Vec<u8>) {
        let mut c = Compressor::default();
        let mut out = VecDeque::new();
        c.pass(Effect::Respond(Head::new(200, "application/json")), &mut out);
        for chunk in chunks {
            c.pass(Effect::Body(Bytes::copy_from_slice(chunk)), &mut out);
        }
        c.pass(Effect::End, &mut out);
        let Some(Effect::Respond(head)) = out.pop_front() else { panic!("no head first") };
        assert!(matches!(out.pop_back(), Some(Effect::End)));
        let body = out.into_iter().flat_map(|e| if let Effect::Body(b) = e { b.to_vec() } else { panic!("{e:?}") }).collect();
        (head, body)
    }

    #[test]
    fn accept_encoding_tokens_as_kube_reads_them() {
        assert!(accepts_gzip(Some("gzip")));
        assert!(accepts_gzip(Some("deflate, gzip ,br")));
        assert!(!accepts_gzip(Some("gzip;q=1")));
        assert!(!accepts_gzip(Some("GZIP")));
        assert!(!accepts_gzip(Some("*")));
        assert!(!accepts_gzip(None));
    }

    #[test]
    fn bodies_up_to_the_threshold_are_not_compressed() {
        let body = vec![b'a'; GZIP_THRESHOLD_BYTES];
        let (head, got) = run(&[&body[..1000], &body[1000..]]);
        assert_eq!(head.headers.len(), 1);
        assert_eq!(got, body);
    }

    #[test]
    fn bodies_past_the_threshold_are_gzip_from_their_first_byte() {
        let body: Vec<u8> = (0..GZIP_THRESHOLD_BYTES * 3).map(|i| (i % 251) as u8).collect();
        let chunks: Vec<&[u8]> = body.chunks(10_000).collect();
        let (head, got) = run(&chunks);
        assert!(head.headers.contains(&("Content-Encoding".into(), "gzip".into())));
        assert!(head.headers.contains(&("Vary".into(), "Accept-Encoding".into())));
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&got[..]).read_to_end(&mut plain).unwrap();
        assert_eq!(plain, body);
    }
}
