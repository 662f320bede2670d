//! [`AgentCall`]: one sub-agent invocation a planner requests — which sub-agent, its tag, its bindings,
//! whether its output is written, whether it serves an item of a mapped collection.

use serde_json::{Map, Value};

/// One sub-agent invocation requested by a planner.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentCall {
    /// Index of the sub-agent in the composite's `sub_agents` list.
    pub agent: usize,
    /// A planner-chosen tag returned in the [`crate::Completion`] (e.g. the item index of a mapper call).
    pub tag: u64,
    /// Input values bound for this call only; they take precedence over the scope and are not written to it.
    pub bindings: Option<Map<String, Value>>,
    /// Whether the agent's result is written to its `output_key` (a mapper turns this off).
    pub write_output: bool,
    /// Whether `tag` numbers one item of a mapped collection (the parallel mapper's calls): the same agent
    /// runs once per item at the same path, so the invocation and everything below it see `#<tag>` as their
    /// item ([`InvocationContext::item`](crate::InvocationContext::item)), which human steps append to their
    /// response ids.
    pub item: bool,
}

impl AgentCall {
    /// Calls sub-agent `agent` with tag 0, no bindings, writing its output.
    pub fn new(agent: usize) -> Self {
        AgentCall { agent, tag: 0, bindings: None, write_output: true, item: false }
    }

    /// Sets the tag.
    pub fn tag(mut self, tag: u64) -> Self {
        self.tag = tag;
        self
    }

    /// Binds input values for this call only.
    pub fn bindings(mut self, bindings: Map<String, Value>) -> Self {
        self.bindings = Some(bindings);
        self
    }

    /// Sets whether the output is written to the agent's `output_key`.
    pub fn write_output(mut self, write: bool) -> Self {
        self.write_output = write;
        self
    }

    /// Marks the call as item number `tag` of a mapped collection (sets the tag; see [`AgentCall::item`]).
    pub fn item(mut self, tag: u64) -> Self {
        self.tag = tag;
        self.item = true;
        self
    }
}
