//! Every interleaving of a cache task and a connection task on one hand-off, model-checked:
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p kapi-handoff --release --test loom`.
#![cfg(loom)]

use kapi_handoff::{TrySendError, channel};
use loom::future::block_on;
use loom::thread;

/// Frames the sender got in arrive once each, in order, and the stream ends after the last.
#[test]
fn accepted_frames_arrive_once_in_order_then_the_end() {
    loom::model(|| {
        let (tx, mut rx) = channel(2);
        let sender = thread::spawn(move || {
            let mut accepted = Vec::new();
            for frame in 0..3 {
                match tx.try_send(frame) {
                    Ok(()) => accepted.push(frame),
                    Err(TrySendError::Full(f)) => assert_eq!(f, frame),
                    Err(TrySendError::Closed(_)) => panic!("the receiver is alive"),
                }
            }
            accepted
        });
        let mut received = Vec::new();
        while let Some(frame) = block_on(rx.recv()) {
            received.push(frame);
        }
        assert_eq!(received, sender.join().unwrap());
    });
}

/// A receiver parked on an empty queue is woken by the send, while the sender lives on (a lost
/// wake-up deadlocks: the sender waits for the receiver to finish).
#[test]
fn a_parked_receiver_is_woken_by_a_send() {
    loom::model(|| {
        let (tx, mut rx) = channel(1);
        let sender = thread::spawn(move || {
            assert_eq!(tx.try_send(1), Ok(()));
            block_on(tx.closed());
        });
        assert_eq!(block_on(rx.recv()), Some(1));
        drop(rx);
        sender.join().unwrap();
    });
}

/// A connection that goes away is noticed by a waiter in `closed()` and by the next send,
/// whatever the order.
#[test]
fn a_receiver_that_leaves_is_noticed() {
    loom::model(|| {
        let (tx, rx) = channel::<u32>(1);
        let closed = tx.closed();
        let watcher = thread::spawn(move || block_on(closed));
        let connection = thread::spawn(move || drop(rx));
        connection.join().unwrap();
        assert_eq!(tx.try_send(7), Err(TrySendError::Closed(7)));
        watcher.join().unwrap();
    });
}

/// A frame queued as the receiver leaves is dropped with it, never delivered twice or leaked
/// into a later state: the send either succeeds before the close or reports it.
#[test]
fn a_send_racing_the_receiver_leaving_is_accepted_or_refused_as_closed() {
    loom::model(|| {
        let (tx, rx) = channel::<std::sync::Arc<()>>(1);
        let frame = std::sync::Arc::new(());
        let probe = frame.clone();
        let connection = thread::spawn(move || drop(rx));
        match tx.try_send(frame) {
            Ok(()) | Err(TrySendError::Closed(_)) => {}
            Err(TrySendError::Full(_)) => panic!("the queue had room"),
        }
        connection.join().unwrap();
        assert_eq!(std::sync::Arc::strong_count(&probe), 1, "the frame was freed");
    });
}
