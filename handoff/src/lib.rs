//! The hand-off of watch frames from a cache task to one watch connection: a bounded queue
//! with one sender (the cache task) and one receiver (the connection's response body).
//!
//! The cache task never waits on a watcher: [`Sender::try_send`] takes a frame or says the
//! queue is full (the watch cache then closes the slow watcher, as kube-apiserver does) or that
//! the connection is gone. The connection awaits frames with [`Receiver::recv`] or as a
//! `Stream`, and ends when the sender is dropped, after the frames already queued.
//! [`Sender::closed`] resolves once the receiver is dropped, so a watcher that receives nothing
//! is still forgotten when its client leaves.
//!
//! Built on `loom`'s primitives under `cfg(loom)`: `tests/loom.rs` checks every interleaving of
//! the two sides (`RUSTFLAGS="--cfg loom" cargo test -p kapi-handoff --release`).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[cfg(loom)]
use loom::sync::{Arc, Mutex, MutexGuard};
#[cfg(not(loom))]
use std::sync::{Arc, Mutex, MutexGuard};

struct State<T> {
    queue: VecDeque<T>,
    capacity: usize,
    /// The receiver waiting for a frame or for the end.
    receiver_waker: Option<Waker>,
    /// Whoever waits in [`Sender::closed`].
    closed_waker: Option<Waker>,
    sender_alive: bool,
    receiver_alive: bool,
}

struct Shared<T>(Mutex<State<T>>);

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // Nothing panics while holding the lock, so a poisoned lock still holds a sound state.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Why [`Sender::try_send`] gave the frame back.
#[derive(Debug, PartialEq, Eq)]
pub enum TrySendError<T> {
    /// `capacity` frames are waiting: the receiver does not keep up.
    Full(T),
    /// The receiver is gone.
    Closed(T),
}

/// The cache task's end.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// The connection's end.
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

/// A queue that holds up to `capacity` frames.
pub fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let state = State { queue: VecDeque::new(), capacity: capacity.max(1), receiver_waker: None, closed_waker: None, sender_alive: true, receiver_alive: true };
    let shared = Arc::new(Shared(Mutex::new(state)));
    (Sender { shared: shared.clone() }, Receiver { shared })
}

impl<T> Sender<T> {
    /// Queues `frame` without waiting.
    pub fn try_send(&self, frame: T) -> Result<(), TrySendError<T>> {
        let mut s = self.shared.lock();
        if !s.receiver_alive {
            return Err(TrySendError::Closed(frame));
        }
        if s.queue.len() >= s.capacity {
            return Err(TrySendError::Full(frame));
        }
        s.queue.push_back(frame);
        let waker = s.receiver_waker.take();
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// Resolves once the receiver is dropped.
    pub fn closed(&self) -> Closed<T> {
        Closed { shared: self.shared.clone() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut s = self.shared.lock();
        s.sender_alive = false;
        let waker = s.receiver_waker.take();
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The future of [`Sender::closed`]; it does not keep the sender alive.
pub struct Closed<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Future for Closed<T> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.shared.lock();
        if !s.receiver_alive {
            return Poll::Ready(());
        }
        s.closed_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl<T> Receiver<T> {
    /// The next frame; `None` once the sender is gone and every queued frame was taken.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut s = self.shared.lock();
        if let Some(frame) = s.queue.pop_front() {
            return Poll::Ready(Some(frame));
        }
        if !s.sender_alive {
            return Poll::Ready(None);
        }
        s.receiver_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    pub fn recv(&mut self) -> impl Future<Output = Option<T>> + '_ {
        std::future::poll_fn(|cx| self.poll_recv(cx))
    }
}

impl<T> futures_core::Stream for Receiver<T> {
    type Item = T;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.get_mut().poll_recv(cx)
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut s = self.shared.lock();
        s.receiver_alive = false;
        let queued = std::mem::take(&mut s.queue);
        let waker = s.closed_waker.take();
        drop(s);
        drop(queued);
        if let Some(w) = waker {
            w.wake();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn ready<F: Future>(f: F) -> Option<F::Output> {
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(v) => Some(v),
            Poll::Pending => None,
        }
    }

    #[test]
    fn a_full_queue_gives_the_frame_back_and_queued_frames_outlive_the_sender() {
        let (tx, mut rx) = channel(2);
        assert_eq!(tx.try_send(1), Ok(()));
        assert_eq!(tx.try_send(2), Ok(()));
        assert_eq!(tx.try_send(3), Err(TrySendError::Full(3)));
        assert_eq!(ready(rx.recv()), Some(Some(1)));
        assert_eq!(ready(rx.recv()), Some(Some(2)));
        assert_eq!(ready(rx.recv()), None, "waits while the sender lives");
        drop(tx);
        assert_eq!(ready(rx.recv()), Some(None));
    }

    #[test]
    fn a_dropped_receiver_closes_the_channel() {
        let (tx, rx) = channel(2);
        let closed = tx.closed();
        assert_eq!(ready(tx.closed()), None);
        drop(rx);
        assert_eq!(ready(closed), Some(()));
        assert_eq!(tx.try_send(1), Err(TrySendError::Closed(1)));
    }
}
