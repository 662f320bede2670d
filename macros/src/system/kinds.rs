//! The agent kinds of `#[agents]` methods, one descriptor each ([`KINDS`]): the attribute's name, the keys it
//! accepts and requires, where its sub-agents are named, whether it asks a chat model, and which builder call
//! writes it ([`Builder`]). Reading a method ([`super::method`]) and writing its builder ([`super::build`])
//! both go through the method's descriptor, so a kind has exactly the grammar its entry gives.
//!
//! Plain data, without `syn`: `tests/it/declarative_kinds.rs` includes this file to check it against the
//! planners' descriptors (`agentic_planners::builtin_kinds`), which the macro crate cannot depend on.

/// Keys every agent attribute takes.
pub const COMMON: &[&str] = &["output_key", "description", "name"];

/// One agent kind: an attribute of an `#[agents]` method.
#[derive(Debug)]
pub struct Kind {
    /// The attribute (`#[sequence(..)]`).
    pub name: &'static str,
    /// The planner kind a spec names for it (`kind: loop`), `None` for the leaves (`agent`, `human`).
    #[allow(dead_code, reason = "read by tests/it/declarative_kinds.rs, which checks it against the planners")]
    pub planner: Option<&'static str>,
    /// The keys it takes besides [`COMMON`], in the order its error messages list them.
    pub keys: &'static [&'static str],
    /// The keys it requires, each with what the error says after `missing `.
    pub required: &'static [(&'static str, &'static str)],
    /// Its keys that are fields of its planner's descriptor under that field's name (`(macro key, field)`);
    /// its other keys take Rust values (functions) a spec writes otherwise, or none.
    #[allow(dead_code, reason = "read by tests/it/declarative_kinds.rs, which checks it against the planners")]
    pub fields: &'static [(&'static str, &'static str)],
    /// Where its sub-agents are named.
    pub subs: Subs,
    /// Whether it asks a chat model (the builder's, or one set for it).
    pub model: bool,
    /// The builder call that makes it.
    pub builder: Builder,
}

/// Where a kind names its sub-agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subs {
    /// None: an LLM agent or a human step.
    Leaf,
    /// `agents(a, b, ..)`.
    Agents,
    /// `branch(when = f, agents(..))`, repeated.
    Branches,
    /// `desire(.., agents(..))`, repeated.
    Desires,
    /// `agent = a`: the agent mapped over the items.
    Mapped,
    /// `debaters(..)`, then `judge = a`.
    Debaters,
}

/// The builder call a kind's agent is made with (one arm each in [`super::build`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builder {
    /// `LlmAgent::builder(model)`.
    Llm,
    /// `human_builder(name, prompt)`.
    Human,
    /// `Sequence::builder()`.
    Sequence,
    /// `Loop::builder()`.
    Loop,
    /// `Parallel::builder()`.
    Parallel,
    /// `Conditional::builder()`.
    Conditional,
    /// `Supervisor::builder()`.
    Supervisor,
    /// `ParallelMapper::builder()`.
    ParallelMapper,
    /// `Goap::builder()`.
    Goap,
    /// `P2p::builder()`.
    P2p,
    /// `Blackboard::builder()`.
    Blackboard,
    /// `Voting::builder()`.
    Voting,
    /// `Debate::builder()`.
    Debate,
    /// `Bdi::builder()`.
    Bdi,
    /// `DecisionRouter::builder()`.
    DecisionRouter,
}

/// What the error says when a composite names no sub-agents.
const AGENTS: (&str, &str) = ("agents", "`agents(..)`: the sub-agents, by method name");

/// Every kind, in the order the "unknown kind" error lists them.
pub const KINDS: &[Kind] = &[
    Kind {
        name: "agent",
        planner: None,
        keys: &[
            "system",
            "user",
            "max_tokens",
            "temperature",
            "optional",
            "streaming",
            "memory_window",
            "inputs",
            "model",
        ],
        required: &[("user", "`user = \"..\"`: the user message template")],
        fields: &[],
        subs: Subs::Leaf,
        model: true,
        builder: Builder::Llm,
    },
    Kind {
        name: "human",
        planner: None,
        keys: &["prompt", "response_id", "inputs", "optional"],
        required: &[("prompt", "`prompt = \"..\"`: the question the person is asked")],
        fields: &[],
        subs: Subs::Leaf,
        model: false,
        builder: Builder::Human,
    },
    Kind {
        name: "sequence",
        planner: Some("sequence"),
        keys: &["agents", "output"],
        required: &[AGENTS],
        fields: &[("agents", "agents")],
        subs: Subs::Agents,
        model: false,
        builder: Builder::Sequence,
    },
    Kind {
        name: "looping",
        planner: Some("loop"),
        keys: &["agents", "output", "max_iterations", "exit", "at_end"],
        required: &[AGENTS],
        fields: &[
            ("agents", "agents"),
            ("max_iterations", "max_iterations"),
            ("exit", "exit_when"),
            ("at_end", "test_exit_at_loop_end"),
        ],
        subs: Subs::Agents,
        model: false,
        builder: Builder::Loop,
    },
    Kind {
        name: "parallel",
        planner: Some("parallel"),
        keys: &["agents", "output", "max_concurrency"],
        required: &[AGENTS],
        fields: &[("agents", "agents"), ("max_concurrency", "max_concurrency")],
        subs: Subs::Agents,
        model: false,
        builder: Builder::Parallel,
    },
    Kind {
        name: "conditional",
        planner: Some("conditional"),
        keys: &["branch", "output"],
        required: &[("branch", "`branch(when = condition, agents(..))`")],
        fields: &[("branch", "branches")],
        subs: Subs::Branches,
        model: false,
        builder: Builder::Conditional,
    },
    Kind {
        name: "supervisor",
        planner: Some("supervisor"),
        keys: &["agents", "max_invocations", "max_retries", "response", "context", "request_key", "model"],
        required: &[AGENTS],
        fields: &[
            ("agents", "agents"),
            ("max_invocations", "max_invocations"),
            ("response", "response_strategy"),
            ("context", "supervisor_context"),
        ],
        subs: Subs::Agents,
        model: true,
        builder: Builder::Supervisor,
    },
    Kind {
        name: "parallel_mapper",
        planner: Some("parallel_mapper"),
        keys: &["agent", "items_key", "item_key", "max_concurrency", "output"],
        required: &[
            ("agent", "`agent = ..`: the agent mapped over the items"),
            ("items_key", "`items_key = \"..\"`: the state key holding the list"),
        ],
        fields: &[
            ("agent", "agent"),
            ("items_key", "items"),
            ("item_key", "item_key"),
            ("max_concurrency", "max_concurrency"),
        ],
        subs: Subs::Mapped,
        model: false,
        builder: Builder::ParallelMapper,
    },
    Kind {
        name: "goap",
        planner: Some("goap"),
        keys: &["agents", "output"],
        required: &[AGENTS],
        fields: &[("agents", "agents")],
        subs: Subs::Agents,
        model: false,
        builder: Builder::Goap,
    },
    Kind {
        name: "p2p",
        planner: Some("p2p"),
        keys: &["agents", "max_invocations", "exit", "output"],
        required: &[AGENTS],
        fields: &[("agents", "agents"), ("max_invocations", "max_invocations"), ("exit", "exit_when")],
        subs: Subs::Agents,
        model: false,
        builder: Builder::P2p,
    },
    Kind {
        name: "blackboard",
        planner: Some("blackboard"),
        keys: &["agents", "goal", "max_invocations", "prefer", "output"],
        required: &[AGENTS],
        fields: &[("agents", "agents"), ("goal", "goal"), ("max_invocations", "max_invocations"), ("prefer", "prefer")],
        subs: Subs::Agents,
        model: false,
        builder: Builder::Blackboard,
    },
    Kind {
        name: "voting",
        planner: Some("voting"),
        keys: &["agents", "strategy", "aggregate", "output"],
        required: &[AGENTS],
        fields: &[("agents", "agents"), ("strategy", "strategy")],
        subs: Subs::Agents,
        model: false,
        builder: Builder::Voting,
    },
    Kind {
        name: "debate",
        planner: Some("debate"),
        keys: &["debaters", "judge", "max_rounds", "converged", "output"],
        required: &[
            ("debaters", "`debaters(..)`: the debaters, by method name"),
            ("judge", "`judge = ..`: the agent deciding the answer"),
        ],
        fields: &[("debaters", "debaters"), ("judge", "judge"), ("max_rounds", "max_rounds")],
        subs: Subs::Debaters,
        model: false,
        builder: Builder::Debate,
    },
    Kind {
        name: "bdi",
        planner: Some("bdi"),
        keys: &["desire", "max_invocations", "output"],
        required: &[("desire", "`desire(name = \"..\", priority = N, .., agents(..))`")],
        fields: &[("desire", "desires"), ("max_invocations", "max_invocations")],
        subs: Subs::Desires,
        model: false,
        builder: Builder::Bdi,
    },
    Kind {
        name: "decision_router",
        planner: Some("decision_router"),
        keys: &["agents", "threshold", "max_retries", "request_key", "output", "model"],
        required: &[AGENTS],
        fields: &[("agents", "agents"), ("threshold", "threshold")],
        subs: Subs::Agents,
        model: true,
        builder: Builder::DecisionRouter,
    },
];

/// The kind whose attribute is `name`.
pub fn kind(name: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.name == name)
}

impl Kind {
    /// What the error says when the required key `key` is missing (after `missing `).
    pub fn missing(&self, key: &str) -> &'static str {
        self.required.iter().find(|(k, _)| *k == key).map_or("a required argument", |(_, what)| what)
    }
}
