//! What an invocation runs with ([`Frame`], handed down the actor tree as one value), and the pure functions
//! that derive a child's frame from its parent's.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::call::AgentCall;
use crate::error_handler::ErrorHandler;
use crate::journal::AsyncInItem;
use crate::listener::ListenerRef;

/// The settings of one invocation, derived from its parent's frame and the planner's call.
#[derive(Clone)]
pub(crate) struct Frame {
    /// Stable path id (`root/1/0`).
    pub(crate) path: Arc<str>,
    /// Input values for this call only (a mapper's item), inherited by a composite's sub-agents.
    pub(crate) bindings: Option<Arc<Map<String, Value>>>,
    /// Which mapper item the call serves (`#3`, `#3#0` nested), inherited like the bindings: what response
    /// ids and idempotency keys append.
    pub(crate) item: Option<Arc<str>>,
    /// The scope layer of that item: the item qualified by the mapped call's path at every level
    /// (`|root/0#3`, `|root/0#3|root/0/1/0#0`), so the items of two mappers running at once never share one.
    pub(crate) layer: Option<Arc<str>>,
    /// 1-based; an error handler's retry increases it.
    pub(crate) attempt: u32,
    /// The error handler in effect (the composite's own, else inherited).
    pub(crate) handler: Option<Arc<dyn ErrorHandler>>,
    /// Listeners inherited from the parent (and the run).
    pub(crate) listeners: Arc<[ListenerRef]>,
    /// Whether the result is written to the agent's output key (a mapper's calls do not).
    pub(crate) write_output: bool,
    /// False for the root: `async` has no effect there (the run waits for its result).
    pub(crate) allow_async: bool,
    /// The parent's span: the invocation's span nests under it, across actors.
    pub(crate) span: tracing::Span,
}

impl Frame {
    /// The frame of a run's root invocation.
    pub(crate) fn root(listeners: Arc<[ListenerRef]>) -> Frame {
        Frame {
            path: Arc::from("root"),
            bindings: None,
            item: None,
            layer: None,
            attempt: 1,
            handler: None,
            listeners,
            write_output: true,
            allow_async: false,
            span: tracing::Span::current(),
        }
    }

    /// Whether this is the frame of a run's root invocation.
    pub(crate) fn is_root(&self) -> bool {
        !self.allow_async && &*self.path == "root" && self.layer.is_none()
    }

    /// The frame of an async agent restarted on resume at `path`, in the mapper item it served, if any.
    pub(crate) fn restarted_async(path: &str, in_item: Option<&AsyncInItem>, listeners: Arc<[ListenerRef]>) -> Frame {
        let mut frame = Frame { path: Arc::from(path), allow_async: true, ..Frame::root(listeners) };
        if let Some(started) = in_item {
            frame.item = Some(Arc::from(item_of_layer(&started.layer).as_str()));
            frame.layer = Some(Arc::from(started.layer.as_str()));
            frame.bindings = started.bindings.clone().map(Arc::new);
        }
        frame
    }

    /// The frame of sub-agent call `call` of the composite running in this frame, at `path`.
    pub(crate) fn child(
        &self,
        path: Arc<str>,
        call: &AgentCall,
        attempt: u32,
        handler: Option<Arc<dyn ErrorHandler>>,
        listeners: Arc<[ListenerRef]>,
        span: tracing::Span,
    ) -> Frame {
        let bindings = bindings_of(self.bindings.as_ref(), call);
        let item = item_of(self.item.as_ref(), call);
        let layer = layer_of(self.layer.as_ref(), &path, call);
        Frame {
            path,
            bindings,
            item,
            layer,
            attempt,
            handler,
            listeners,
            write_output: call.write_output,
            allow_async: true,
            span,
        }
    }
}

/// The values bound to the invocation of `call` below a composite bound to `parent`: the call's own over the
/// inherited ones.
pub(crate) fn bindings_of(
    parent: Option<&Arc<Map<String, Value>>>,
    call: &AgentCall,
) -> Option<Arc<Map<String, Value>>> {
    match (parent, &call.bindings) {
        (None, None) => None,
        (Some(inherited), None) => Some(inherited.clone()),
        (None, Some(own)) => Some(Arc::new(own.clone())),
        (Some(inherited), Some(own)) => {
            let mut merged = (**inherited).clone();
            merged.extend(own.clone());
            Some(Arc::new(merged))
        }
    }
}

/// The mapper item the invocation of `call` serves, below a composite serving `parent`: a mapper's call serves
/// one item, `#<tag>` after the inherited one; any other call serves the parent's.
pub(crate) fn item_of(parent: Option<&Arc<str>>, call: &AgentCall) -> Option<Arc<str>> {
    if call.item {
        let mut tag = itoa::Buffer::new();
        Some(Arc::from([parent.map_or("", |p| &**p), "#", tag.format(call.tag)].concat().as_str()))
    } else {
        parent.cloned()
    }
}

/// The mapper item of scope layer `layer`: the `#<tag>` of each of its levels (`|root/0#3|root/0/1/0#0` is
/// `#3#0`), as [`item_of`] built it.
pub(crate) fn item_of_layer(layer: &str) -> String {
    crate::journal::item_of_layer(layer)
}

/// The scope layer of the invocation of `call` at `path`, below a composite whose layer is `parent`: a
/// mapper's call opens `|<path>#<tag>` after the inherited layer; any other call stays in the parent's.
pub(crate) fn layer_of(parent: Option<&Arc<str>>, path: &str, call: &AgentCall) -> Option<Arc<str>> {
    if call.item {
        let mut tag = itoa::Buffer::new();
        Some(Arc::from([parent.map_or("", |p| &**p), "|", path, "#", tag.format(call.tag)].concat().as_str()))
    } else {
        parent.cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_item_of_a_layer_is_the_tag_of_each_level() {
        assert_eq!(item_of_layer("|root/0#3"), "#3");
        assert_eq!(item_of_layer("|root/0#3|root/0/1/0#0"), "#3#0");
        assert_eq!(item_of_layer(""), "");
    }
}
