//! # agentic-planners
//!
//! The built-in planners of `agentic`, one file each, and the builders of the composites that use them:
//! [`Sequence`], [`Loop`], [`Parallel`], [`ParallelMapper`], [`Conditional`]. Behaviour follows
//! `docs/semantics.md`. Write your own planner by implementing `agentic_engine::Planner` and building an
//! `agentic_engine::Composite`.

mod common;
pub mod conditional;
pub mod looping;
pub mod parallel;
pub mod parallel_mapper;
pub mod sequential;

pub use common::{CompositeBuilderExt, CompositeParts, Condition};
pub use conditional::{Conditional, ConditionalBuilder, ConditionalPlanner};
pub use looping::{ExitCondition, Loop, LoopBuilder, LoopPlanner};
pub use parallel::{Parallel, ParallelBuilder, ParallelPlanner};
pub use parallel_mapper::{MapperPlanner, ParallelMapper, ParallelMapperBuilder};
pub use sequential::{Sequence, SequenceBuilder, SequentialPlanner};
