//! Streamed results: [`InvokeRequest::stream`] runs a system and hands back its answer as it is produced —
//! the tokens of the system's final agent, then the run's end — as a [`ResultStream`].
//!
//! The final agent is found before the run, from the structure: a leaf root is its own final agent; a
//! composite whose planner always calls the same sub-agent last ([`Planner::last_agent`]: a sequence's last
//! sub-agent) hands the question down to it; any other composite (a loop, a parallel block, a conditional, a
//! supervisor...) has no fixed final agent, and the stream then carries only the run's end. When the final
//! agent streams ([`Agent::streams`]: an LLM agent with streaming on), its `Token` events are the stream's
//! tokens; every other agent of the system runs as usual (streaming ones included: their tokens are
//! consumed internally, as events), and the state, the journal and the outcome are those of an ordinary run.
//! Follows LangChain4j agentic's rule: a streaming agent propagates its token stream to the system only when it
//! is the agent the system invokes last.
//!
//! [`Planner::last_agent`]: crate::planner::Planner::last_agent
//! [`Agent::streams`]: crate::agent::Agent::streams

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::mpsc;
use tokio_util::task::AbortOnDropHandle;

use super::composite::composite_of;
use super::request::{InvokeRequest, RunOutcome};
use crate::agent::AgentRef;
use crate::error::AgentError;
use crate::listener::{AgentListener, RunEvent};

/// The agent whose tokens a system's result stream carries: its path in the system (`root/2`) and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamSource {
    /// The agent's path (`root` for a leaf root, `root/2` for a sequence's third and last sub-agent).
    pub path: String,
    /// The agent's name.
    pub agent: String,
}

impl AgentRef {
    /// The agent whose tokens are this system's streamed answer ([`InvokeRequest::stream`]), or `None` when
    /// the system has no fixed final agent or its final agent does not stream. Follows
    /// [`Planner::last_agent`](crate::planner::Planner::last_agent) down from this agent (a sequence: its last
    /// sub-agent, recursively) to a leaf, which must stream ([`Agent::streams`](crate::agent::Agent::streams)).
    pub fn stream_source(&self) -> Option<StreamSource> {
        let mut agent = self.clone();
        let mut path = "root".to_string();
        loop {
            let next = match composite_of(&agent) {
                Some(composite) => {
                    let index = composite.last_agent()?;
                    path = format!("{path}/{index}");
                    agent.0.sub_agents().get(index)?.clone()
                }
                None => {
                    return agent.0.streams().then(|| StreamSource { path, agent: agent.name().to_string() });
                }
            };
            agent = next;
        }
    }
}

/// One item of a [`ResultStream`].
#[derive(Debug)]
#[non_exhaustive]
pub enum StreamItem {
    /// A text delta of the final agent's answer, in the order the model produced it.
    Token(String),
    /// The final agent started again (its error handler retries it after a failure): the tokens received so
    /// far belong to a failed attempt, and the next ones to attempt `attempt` (2 for the first retry).
    Retry {
        /// The attempt that starts, 2 or more.
        attempt: u32,
    },
    /// The run stopped without failing: completed (the output, and the final state holding the final agent's
    /// whole answer under its output key), suspended (the pending responses: answer and resume it, with
    /// `outcome.resume().answer(..).stream()` to stream the rest) or drained. Always the last item.
    End(RunOutcome),
}

/// What the run's task and its token listener send to the stream, in order.
enum Tapped {
    Token(String),
    Retry(u32),
    End(Result<RunOutcome, AgentError>),
}

/// The listener of a streamed run: forwards the final agent's tokens and retries.
struct TokenTap {
    path: Arc<str>,
    tx: mpsc::UnboundedSender<Tapped>,
}

impl AgentListener for TokenTap {
    fn inherited(&self) -> bool {
        true
    }

    fn on_event(&self, event: &RunEvent) {
        match event {
            RunEvent::Token { path, text, .. } if **path == *self.path => {
                let _ = self.tx.send(Tapped::Token(text.clone()));
            }
            RunEvent::AgentStarted { path, attempt, .. } if **path == *self.path && *attempt > 1 => {
                let _ = self.tx.send(Tapped::Retry(*attempt));
            }
            _ => {}
        }
    }
}

/// A run's answer as it is produced: `futures::Stream<Item = Result<StreamItem, AgentError>>`. Made by
/// [`InvokeRequest::stream`].
///
/// Items: the final agent's tokens ([`StreamItem::Token`], with [`StreamItem::Retry`] when it starts again),
/// then exactly one terminal item — `Ok(`[`StreamItem::End`]`)` when the run completes, suspends or is
/// drained, or `Err(error)` when it fails (the error names the agent that failed and its path, as awaiting
/// the request would return it) — and then `None`. A system whose final agent does not stream
/// ([`ResultStream::source`] is `None`) yields only the terminal item.
///
/// Dropping the stream before its end stops the run, as dropping an awaited request's future does (the
/// journal keeps what completed; resume it by its memory id).
pub struct ResultStream {
    rx: mpsc::UnboundedReceiver<Tapped>,
    /// The run's task, until it ended.
    task: Option<AbortOnDropHandle<()>>,
    source: Option<StreamSource>,
    ended: bool,
}

impl std::fmt::Debug for ResultStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResultStream").field("source", &self.source).field("ended", &self.ended).finish()
    }
}

impl ResultStream {
    /// The agent whose tokens this stream carries, or `None` when it carries only the run's end (see
    /// [`AgentRef::stream_source`]).
    pub fn source(&self) -> Option<&StreamSource> {
        self.source.as_ref()
    }

    /// The next item; `None` after the terminal one. The same as `futures::StreamExt::next`, without the
    /// trait.
    pub async fn recv(&mut self) -> Option<Result<StreamItem, AgentError>> {
        std::future::poll_fn(|cx| futures::Stream::poll_next(Pin::new(&mut *self), cx)).await
    }

    /// Skips the remaining tokens and waits for the run's end.
    ///
    /// # Errors
    /// The run's failure, as awaiting the request would return it; [`AgentError::Internal`] when the stream
    /// had already yielded its end.
    pub async fn outcome(mut self) -> Result<RunOutcome, AgentError> {
        while let Some(item) = self.recv().await {
            if let StreamItem::End(outcome) = item? {
                return Ok(outcome);
            }
        }
        Err(AgentError::internal("the result stream had already yielded the run's end"))
    }
}

impl futures::Stream for ResultStream {
    type Item = Result<StreamItem, AgentError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        loop {
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(Tapped::Token(text))) => return Poll::Ready(Some(Ok(StreamItem::Token(text)))),
                Poll::Ready(Some(Tapped::Retry(attempt))) => {
                    return Poll::Ready(Some(Ok(StreamItem::Retry { attempt })));
                }
                Poll::Ready(Some(Tapped::End(result))) => {
                    self.ended = true;
                    self.task = None;
                    return Poll::Ready(Some(result.map(StreamItem::End)));
                }
                // Nothing yet (or every sender gone): the run's task sends its end before it finishes, so a
                // task that finished without one panicked or was aborted.
                Poll::Ready(None) | Poll::Pending => {
                    let Some(task) = self.task.as_mut() else { return Poll::Pending };
                    match Pin::new(task).poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Ok(())) => self.task = None,
                        Poll::Ready(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                        Poll::Ready(Err(_)) => {
                            self.ended = true;
                            self.task = None;
                            return Poll::Ready(Some(Err(AgentError::Cancelled)));
                        }
                    }
                }
            }
        }
    }
}

impl InvokeRequest {
    /// Starts the run in the background and returns its answer as a stream: the tokens of the system's final
    /// agent as they come, then how the run ended (see [`ResultStream`]). The final agent is the root when it
    /// is a leaf, a sequence's last sub-agent (recursively), and none for other planners
    /// ([`AgentRef::stream_source`]); it streams when it is an LLM agent with streaming on. The rest of the
    /// system runs as it would when awaited: earlier agents, the state, the journal and the outcome are the
    /// same. Every other option of the request applies (memory id, store, answers, listeners, cancel handle).
    ///
    /// Must be called inside a tokio runtime (it spawns the run, as [`InvokeRequest::events`] does).
    pub fn stream(self) -> ResultStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let source = self.agent.stream_source();
        let request = match &source {
            Some(s) => self.listener(TokenTap { path: Arc::from(s.path.as_str()), tx: tx.clone() }),
            None => self,
        };
        let task = tokio::spawn(async move {
            let result = request.into_future().await;
            let _ = tx.send(Tapped::End(result));
        });
        ResultStream { rx, task: Some(AbortOnDropHandle::new(task)), source, ended: false }
    }
}
