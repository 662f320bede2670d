//! # agentic-planners
//!
//! The built-in planners of `agentic`, one file each, and the builders of the composites that use them.
//! Workflow patterns: [`Sequence`], [`Loop`], [`Parallel`], [`ParallelMapper`], [`Conditional`]. Agentic
//! patterns: [`Goap`] (goal-oriented), [`P2p`] (peer-to-peer), [`Blackboard`], [`Voting`], [`Debate`],
//! [`Bdi`] (belief–desire–intention), [`Supervisor`] (an LLM picks the next agent), [`DecisionRouter`] (a model picks the agents to run). Behaviour follows `docs/semantics.md`; every planner's execution state
//! is complete and serialisable, so a run resumes at the exact step after a crash or a suspension. Write your own planner by implementing `agentic_engine::Planner` and building an
//! `agentic_engine::Composite`.
//!
//! Public surface: the modules are private and every public item is re-exported here, at one path
//! (`agentic_planners::Sequence`, `agentic_planners::PlannerKind`, ...).

mod bdi;
mod blackboard;
mod common;
mod conditional;
mod debate;
mod decision_router;
mod goap;
mod kind;
mod looping;
mod p2p;
mod parallel;
mod parallel_mapper;
mod sequential;
mod supervisor;
mod voting;

pub use bdi::{Bdi, BdiBuilder, BdiKind, BdiPlanner, Desire};
pub use blackboard::{Blackboard, BlackboardBuilder, BlackboardKind, BlackboardPlanner};
pub use common::{CompositeBuilderExt, CompositeParts, Condition};
pub use conditional::{Conditional, ConditionalBuilder, ConditionalKind, ConditionalPlanner};
pub use debate::{Convergence, DEBATE_CONTEXT_KEY, Debate, DebateBuilder, DebateKind, DebatePlanner};
pub use decision_router::{
    CHOICE_QUESTION, CHOICE_QUESTION_NAME, DecisionRouter, DecisionRouterBuilder, DecisionRouterKind,
    ROUTER_AGENT_NAME, RouterDeciderAgent, RouterPlanner,
};
pub use goap::{Goap, GoapBuilder, GoapKind, GoapPlanner};
pub use kind::{Calls, FieldError, FieldType, KindArgs, KindField, ModelUse, PlannerKind, builtin_kinds};
pub use looping::{ExitCondition, Loop, LoopBuilder, LoopKind, LoopPlanner};
pub use p2p::{InvocationCondition, P2p, P2pBuilder, P2pKind, P2pPlanner};
pub use parallel::{Parallel, ParallelBuilder, ParallelKind, ParallelPlanner};
pub use parallel_mapper::{MapperPlanner, ParallelMapper, ParallelMapperBuilder, ParallelMapperKind};
pub use sequential::{Sequence, SequenceBuilder, SequenceKind, SequentialPlanner};
pub use supervisor::{
    ContextStrategy, DONE_AGENT, PLANNER_AGENT_NAME, ResponseStrategy, SCORER_AGENT_NAME, SUMMARIZER_AGENT_NAME,
    SUMMARIZER_PROMPT, SUPERVISOR_CONTEXT_KEY, SUPERVISOR_HISTORY_KEY, SUPERVISOR_RESPONSES_KEY,
    SUPERVISOR_SUMMARY_KEY, Supervisor, SupervisorBuilder, SupervisorKind, SupervisorPlanner, SupervisorPlannerAgent,
    SupervisorScorerAgent, SupervisorStep, SupervisorSummarizerAgent,
};
pub use voting::{Vote, Voting, VotingBuilder, VotingKind, VotingPlanner, VotingStrategy};

/// What the declarative agents' expansions name (`agentic-macros`): the agents' and the composites' builders.
#[doc(hidden)]
pub mod __private {
    pub use agentic_agents::__private::*;

    pub use crate::{
        Bdi, Blackboard, CompositeBuilderExt, Conditional, ContextStrategy, Debate, DecisionRouter, Desire, Goap, Loop,
        P2p, Parallel, ParallelMapper, ResponseStrategy, Sequence, Supervisor, Voting, VotingStrategy,
    };
}
