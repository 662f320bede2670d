//! # agentic-macros
//!
//! Declarative agents for `agentic` (re-exported by the `agentic` crate and its prelude): the attributes
//! write the builder calls, so a declared agent is the same agent a builder makes, with its types declared.
//!
//! - [`macro@agent`] on an `async fn`: a non-AI agent. The parameters are its inputs (each named after the
//!   state key it reads; `Option<T>` is an optional input), the return value (`T` or `Result<T, E>`) is written
//!   to `output_key`. Generates `<fn>_agent() -> AgentRef`; the function stays callable as written.
//! - [`macro@agents`] on a trait: each method is an agent and a typed call — an LLM agent
//!   (`#[agent(system = "..", user = "..", output_key = "..")]`, its parameters the template's variables, its
//!   return type the answer parsed through the type's JSON schema) or a composite over the trait's other
//!   agents (`#[sequence]`, `#[looping]`, `#[parallel]`, `#[conditional]`, `#[supervisor]`). Generates
//!   `<Trait>Agents` (built by `<Trait>Agents::builder(model).build()?`), which implements the trait:
//!   `agents.writer("dragons").await?` runs the agent and returns its typed result; `agents.writer_agent()`
//!   is its `AgentRef` for composition.
//!
//! Every type is declared through `StateType` (the value type of its JSON schema and its Rust name), so two
//! agents disagreeing on a key's type fail when the system is built. Mistakes in the attributes are compile
//! errors naming the attribute: a missing `output_key`, a type that cannot be stored or parsed, a sub-agent the
//! trait does not declare.
//!
//! The idea is LangChain4j agentic's declarative API (annotated interfaces: `@Agent`, `@V`,
//! `@SequenceAgent`, ...); here it is compile-time code generation instead of reflection.
//!
//! Public surface: the modules are private; the attribute macros are the crate root's only items.

mod args;
mod leaf;
mod system;
mod types;

use proc_macro::TokenStream;

/// A non-AI agent from an async function (see the crate docs).
///
/// A parameter reads the state key of its name, or the one `#[key("..")]` on it names.
///
/// A `#[resource] name: T` parameter is no input: a value given when the agent is built (a ledger, a client),
/// cloned into each call; `<fn>_agent` takes it as its parameter, and an `#[agents]` trait naming the function
/// takes it from its builder's `.resource(value)`.
///
/// Arguments: `output_key = ".."` (required when the function returns a value, unless `reply_only`: the result
/// goes to the caller and no state key, or `update`: the result is a struct whose non-null fields are written
/// each to its key), `inputs("a", ..)` (the keys that activate it; a parameter left out is read from the state
/// without activating it), `description = ".."`
/// (default: the doc comment's first paragraph), `name = ".."` (default: the function's name), `optional`
/// (skipped when a required input is missing), `asynchronous`, `timeout_ms = N`, `crate = path` (the crate the
/// expansion names, default `agentic`; `agentic_engine` when only that crate is a dependency).
///
/// ```text
/// /// Counts the words of a story.
/// #[agent(output_key = "words")]
/// async fn word_count(story: String, minimum: Option<i64>) -> Result<i64, String> { .. }
///
/// let counter: AgentRef = word_count_agent();
/// ```
#[proc_macro_attribute]
pub fn agent(attr: TokenStream, item: TokenStream) -> TokenStream {
    leaf::expand(attr.into(), item.into()).unwrap_or_else(syn::Error::into_compile_error).into()
}

/// LLM agents and composites as the methods of a trait, with typed calls (see the crate docs).
///
/// Method attributes (each method has one):
/// - `#[agent(user = "..", system = "..", output_key = "..", description = "..", name = "..", max_tokens = N,
///   temperature = x, memory_window = N, streaming, optional, inputs("a", ..), model = ..)]`: an LLM agent;
///   `user` is required. `model = "name"` asks the model given to the builder as `.model("name", m)`;
///   `model = f` (`fn(&ScopeView) -> Option<String>`) chooses among those models at each invocation, `None`
///   meaning the builder's model (SPEC.md §7). `#[supervisor]` and `#[decision_router]` take `model` too.
/// - `#[human(prompt = "..", output_key = "..", response_id = "..", inputs("a", ..), optional)]`: a human step;
///   the run suspends until the answer is given (a typed call returns `Stop::Suspended`).
/// - `#[sequence(agents(a, b, ..), output_key = "..", output = f)]`,
///   `#[parallel(agents(..), max_concurrency = N, ..)]`,
///   `#[looping(agents(..), max_iterations = N, exit = f, at_end, ..)]` (`f: fn(&ScopeView, u32) -> bool`),
///   `#[conditional(branch(when = f, agents(..)), .., output_key = "..")]` (`f: fn(&ScopeView) -> bool`),
///   `#[supervisor(agents(..), max_invocations = N, max_retries = N, response = "last" | "summary" |
///   "scored", context = "..", request_key = "..")]` (its planner asks the builder's model).
/// - The pattern planners: `#[parallel_mapper(agent = a, items_key = "..", item_key = "..", max_concurrency = N)]`,
///   `#[goap(agents(..), output_key = "goal")]`, `#[p2p(agents(..), max_invocations = N, exit = f)]`
///   (`f: fn(&ScopeView) -> bool`), `#[blackboard(agents(..), goal = f, max_invocations = N)]`,
///   `#[voting(agents(..), strategy = "majority" | "average" | "highest", aggregate = f)]`
///   (`f: fn(&[Vote]) -> Result<Value, String>`), `#[debate(debaters(..), judge = a, max_rounds = N,
///   converged = f)]` (`f: fn(&[Value]) -> bool`), `#[bdi(desire(name = "..", priority = N, satisfied = f |
///   satisfied_key = "..", achievable = f | achievable_key = "..", agents(..)), .., max_invocations = N)]`,
///   `#[decision_router(agents(..), threshold = x, max_retries = N, request_key = "..")]` (its router asks the
///   builder's model); a blackboard also takes `prefer(agent = a, when = f)` (repeated).
///   Sub-agents are the trait's methods by name, or `#[agent]` functions elsewhere by path (`self::f`).
///   `output = f` (`fn(&ScopeView) -> Result<Value, String>`) computes the result from the final state.
///
/// Every method is `async fn name(&self, params..) -> T` and becomes
/// `fn name(&self, p: impl Into<P>, ..) -> impl Future<Output = Result<T, AgentError>> + Send`.
/// Trait argument: `crate = path` (default `agentic`).
#[proc_macro_attribute]
pub fn agents(attr: TokenStream, item: TokenStream) -> TokenStream {
    system::expand(attr.into(), item.into()).unwrap_or_else(syn::Error::into_compile_error).into()
}

/// Declares the attributes that only mean something on a method of an `#[agents]` trait: used anywhere else,
/// they are a compile error saying so.
macro_rules! method_attributes {
    ($($(#[$doc:meta])* $name:ident),*) => {$(
        $(#[$doc])*
        #[proc_macro_attribute]
        pub fn $name(_attr: TokenStream, item: TokenStream) -> TokenStream {
            let message = concat!(
                "`#[", stringify!($name), "]` goes on a method of an `#[agents]` trait, over the trait's agents"
            );
            let item = proc_macro2::TokenStream::from(item);
            let error = syn::Error::new(proc_macro2::Span::call_site(), message).into_compile_error();
            quote::quote!(#error #item).into()
        }
    )*};
}

method_attributes!(
    /// A sequence over sub-agents, on a method of an [`macro@agents`] trait.
    sequence,
    /// A loop over sub-agents, on a method of an [`macro@agents`] trait.
    looping,
    /// Sub-agents run in parallel, on a method of an [`macro@agents`] trait.
    parallel,
    /// Branches of sub-agents under conditions, on a method of an [`macro@agents`] trait.
    conditional,
    /// A supervisor (an LLM picks the next sub-agent), on a method of an [`macro@agents`] trait.
    supervisor,
    /// One agent mapped over a list, on a method of an [`macro@agents`] trait.
    parallel_mapper,
    /// Goal-oriented planning over sub-agents, on a method of an [`macro@agents`] trait.
    goap,
    /// Sub-agents as peers, on a method of an [`macro@agents`] trait.
    p2p,
    /// A blackboard of sub-agents, on a method of an [`macro@agents`] trait.
    blackboard,
    /// Sub-agents voting, on a method of an [`macro@agents`] trait.
    voting,
    /// Debaters and a judge, on a method of an [`macro@agents`] trait.
    debate,
    /// A human step (the run suspends for a person's answer), on a method of an [`macro@agents`] trait.
    human,
    /// Belief-desire-intention planning over desires, on a method of an [`macro@agents`] trait.
    bdi,
    /// A model routing the request to the fitting sub-agents, on a method of an [`macro@agents`] trait.
    decision_router
);
