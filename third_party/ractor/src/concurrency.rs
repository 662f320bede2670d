// Copyright (c) Sean Lawlor
//
// This source code is licensed under both the MIT license found in the
// LICENSE-MIT file in the root directory of this source tree.

//! Shared concurrency primitives utilized within the library for different frameworks (tokio, async-std, etc)

/// A timeout error
#[derive(Debug)]
pub struct Timeout;
impl std::error::Error for Timeout {}
impl std::fmt::Display for Timeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Timeout")
    }
}

/// A notification
pub type Notify = tokio::sync::Notify;

/// A one-use sender
pub type OneshotSender<T> = tokio::sync::oneshot::Sender<T>;
/// A one-use receiver
pub type OneshotReceiver<T> = tokio::sync::oneshot::Receiver<T>;

/// A bounded MP;SC sender
pub type MpscSender<T> = tokio::sync::mpsc::Sender<T>;
/// A bounded MP;SC receiver
pub type MpscReceiver<T> = tokio::sync::mpsc::Receiver<T>;

/// A bounded MP;SC sender
pub type MpscUnboundedSender<T> = tokio::sync::mpsc::UnboundedSender<T>;
/// A bounded MP;SC receiver
pub type MpscUnboundedReceiver<T> = tokio::sync::mpsc::UnboundedReceiver<T>;

/// A bounded broadcast sender
pub type BroadcastSender<T> = tokio::sync::broadcast::Sender<T>;
/// A bounded broadcast receiver
pub type BroadcastReceiver<T> = tokio::sync::broadcast::Receiver<T>;

/// MPSC bounded channel
pub fn mpsc_bounded<T>(buffer: usize) -> (MpscSender<T>, MpscReceiver<T>) {
    tokio::sync::mpsc::channel(buffer)
}

/// MPSC unbounded channel
pub fn mpsc_unbounded<T>() -> (MpscUnboundedSender<T>, MpscUnboundedReceiver<T>) {
    tokio::sync::mpsc::unbounded_channel()
}

/// The sending half of an actor's input port (its message and supervision channels): an unbounded MPSC
/// channel that allocates one node per message instead of tokio's block of 32 slots at creation, so an idle
/// actor's ports cost a few dozen bytes (agentic patch, PATCH.md).
#[derive(Debug)]
pub struct PortSender<T>(futures::channel::mpsc::UnboundedSender<T>);

/// The receiving half of an actor's input port. See [PortSender].
#[derive(Debug)]
pub struct PortReceiver<T>(futures::channel::mpsc::UnboundedReceiver<T>);

impl<T> PortSender<T> {
    /// Sends `value`; gives it back when the receiver is closed or dropped.
    pub fn send(&self, value: T) -> Result<(), tokio::sync::mpsc::error::SendError<T>> {
        self.0
            .unbounded_send(value)
            .map_err(|e| tokio::sync::mpsc::error::SendError(e.into_inner()))
    }
}

impl<T> PortReceiver<T> {
    /// The next value; `None` once every sender is gone (or the port is closed) and nothing is left.
    /// Cancel-safe: a value is only taken when the future completes. As with tokio's channels, each receive
    /// spends a unit of the task's cooperative budget (before the value is taken), so that an actor whose
    /// mailbox never empties still yields to the other tasks of its worker.
    pub async fn recv(&mut self) -> Option<T> {
        tokio::task::consume_budget().await;
        futures::StreamExt::next(&mut self.0).await
    }

    /// Closes the port: sends fail from now on; values already sent can still be received.
    pub fn close(&mut self) {
        self.0.close();
    }

    /// A value already sent, if any.
    pub fn try_recv(&mut self) -> Result<T, ()> {
        self.0.try_recv().map_err(|_| ())
    }
}

/// An actor's input port. See [PortSender].
pub fn port_unbounded<T>() -> (PortSender<T>, PortReceiver<T>) {
    let (tx, rx) = futures::channel::mpsc::unbounded();
    (PortSender(tx), PortReceiver(rx))
}

/// Oneshot channel
pub fn oneshot<T>() -> (OneshotSender<T>, OneshotReceiver<T>) {
    tokio::sync::oneshot::channel()
}

/// Broadcast channel
pub fn broadcast<T: Clone>(buffer: usize) -> (BroadcastSender<T>, BroadcastReceiver<T>) {
    tokio::sync::broadcast::channel(buffer)
}

#[cfg(all(
    not(all(target_arch = "wasm32", target_os = "unknown")),
    not(feature = "async-std")
))]
pub mod tokio_primitives;
#[cfg(all(
    not(all(target_arch = "wasm32", target_os = "unknown")),
    not(feature = "async-std")
))]
pub use self::tokio_primitives::*;

#[cfg(all(
    not(all(target_arch = "wasm32", target_os = "unknown")),
    feature = "async-std"
))]
pub mod async_std_primitives;
#[cfg(all(
    not(all(target_arch = "wasm32", target_os = "unknown")),
    feature = "async-std"
))]
pub use self::async_std_primitives::*;

#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
pub mod wasm_browser_primitives;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
pub use self::wasm_browser_primitives::*;

#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
mod target_specific {
    pub(crate) use web_time::SystemTime;
}
#[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
mod target_specific {
    pub(crate) use std::time::SystemTime;
}

pub(crate) use target_specific::SystemTime;
