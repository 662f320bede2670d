//! The agents registry: agents registered by name, looked up by name, and used as sub-agents of any composite
//! (`registry.agents(["audience_editor", "style_editor"])?` into a builder's `sub_agents`), or from a spec as
//! `kind: registry` (the spec is built with the registry: `agentic_spec::BuildContext::registry`).
//!
//! An entry is any [`AgentRef`]: a local agent (an LLM agent, a closure, a whole workflow) or a remote one (an
//! A2A agent, an MCP tool), so a Rust program can expose its own agents, and the remote agents it knows, to
//! specs and to planners by name. Idea from LangChain4j agentic's `AgentsRegistry` (`allAgents`, `getAgent`,
//! several providers merged into one, a duplicate name an error); registration at run time instead of Java's
//! service loader is ours.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use crate::agent::AgentRef;
use crate::error::RegistryError;

/// Agents by name. Cloning shares the registry: an agent registered through one clone is seen by all.
///
/// A registered agent keeps its own name, kind and fields: topologies, reports, events and a supervisor's
/// prompt show the agent's own name. [`AgentRegistry::register`] registers it under that name, which keeps
/// the two the same; [`AgentRegistry::register_as`] adds another name (an alias) to look it up by.
///
/// ```
/// # use agentic_engine::{AgentRegistry, AgentRef, RegistryError};
/// # fn demo(writer: AgentRef) -> Result<(), RegistryError> {
/// let registry = AgentRegistry::new();
/// registry.register(writer)?;
/// let again = registry.get("writer")?;
/// # let _ = again; Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct AgentRegistry {
    agents: Arc<RwLock<BTreeMap<String, AgentRef>>>,
}

impl std::fmt::Debug for AgentRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRegistry").field("names", &self.names()).finish()
    }
}

impl AgentRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `agent` under its own name ([`AgentRef::name`]).
    ///
    /// # Errors
    /// [`RegistryError::Duplicate`] when an agent is already registered under that name (nothing changes),
    /// [`RegistryError::EmptyName`] when the agent's name is blank.
    pub fn register(&self, agent: AgentRef) -> Result<(), RegistryError> {
        let name = agent.name().to_string();
        self.register_as(name, agent)
    }

    /// Registers `agent` under `name` (the agent keeps its own name everywhere else).
    ///
    /// # Errors
    /// As [`AgentRegistry::register`].
    pub fn register_as(&self, name: impl Into<String>, agent: AgentRef) -> Result<(), RegistryError> {
        let name = name.into();
        if name.trim().is_empty() {
            return Err(RegistryError::EmptyName);
        }
        let mut agents = self.write();
        if agents.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        agents.insert(name, agent);
        Ok(())
    }

    /// Registers every agent of `other` under the same names here (several providers merged into one).
    ///
    /// # Errors
    /// [`RegistryError::Duplicate`] naming the first name registered in both; nothing is added then.
    pub fn merge(&self, other: &AgentRegistry) -> Result<(), RegistryError> {
        let incoming = other.all_agents();
        let mut agents = self.write();
        if let Some(name) = incoming.keys().find(|n| agents.contains_key(*n)) {
            return Err(RegistryError::Duplicate(name.clone()));
        }
        agents.extend(incoming);
        Ok(())
    }

    /// Removes the agent registered under `name`, returning it.
    pub fn remove(&self, name: &str) -> Option<AgentRef> {
        self.write().remove(name)
    }

    /// The agent registered under `name`.
    ///
    /// # Errors
    /// [`RegistryError::Unknown`] naming `name` and listing the registered names.
    pub fn get(&self, name: &str) -> Result<AgentRef, RegistryError> {
        let agents = self.read();
        agents.get(name).cloned().ok_or_else(|| RegistryError::Unknown {
            name: name.to_string(),
            registered: agents.keys().cloned().collect(),
        })
    }

    /// The agent registered under `name`, if any.
    pub fn lookup(&self, name: &str) -> Option<AgentRef> {
        self.read().get(name).cloned()
    }

    /// The agents registered under `names`, in that order: what a composite builder's `sub_agents` takes.
    ///
    /// # Errors
    /// [`RegistryError::Unknown`] for the first name not registered.
    pub fn agents<I, S>(&self, names: I) -> Result<Vec<AgentRef>, RegistryError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        names.into_iter().map(|n| self.get(n.as_ref())).collect()
    }

    /// Every registered agent by name (sorted by name).
    pub fn all_agents(&self) -> BTreeMap<String, AgentRef> {
        self.read().clone()
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// Whether an agent is registered under `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.read().contains_key(name)
    }

    /// How many agents are registered.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether no agent is registered.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// The map, for reading. A lock poisoned by a panicking writer still holds a consistent map (every
    /// write is one insert or remove), so it is used as is.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, AgentRef>> {
        self.agents.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, AgentRef>> {
        self.agents.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::agent::Agent;
    use crate::agent_spec::AgentSpec;
    use crate::invocation::InvocationContext;

    struct Named(AgentSpec);

    impl Agent for Named {
        fn spec(&self) -> &AgentSpec {
            &self.0
        }

        async fn invoke(&self, _ctx: &InvocationContext) -> Result<Value, crate::stop::Stop> {
            Ok(Value::Null)
        }
    }

    fn agent(name: &str) -> AgentRef {
        AgentRef::new(Named(AgentSpec::new(name, "test")))
    }

    #[test]
    fn agents_are_found_by_name_and_unknown_names_list_the_registered_ones() {
        let registry = AgentRegistry::new();
        registry.register(agent("writer")).unwrap_or_else(|e| panic!("{e}"));
        registry.register_as("editor", agent("style_editor")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(registry.names(), ["editor", "writer"]);
        assert_eq!(registry.get("editor").map(|a| a.name().to_string()), Ok("style_editor".to_string()));
        let names: Vec<String> = registry
            .agents(["writer", "editor"])
            .unwrap_or_else(|e| panic!("{e}"))
            .iter()
            .map(|a| a.name().to_string())
            .collect();
        assert_eq!(names, ["writer", "style_editor"]);
        let err = registry.get("critic").map(|_| ()).unwrap_err();
        assert_eq!(err.to_string(), "no agent registered as `critic` (registered: `editor`, `writer`)");
        assert_eq!(
            AgentRegistry::new().get("critic").map(|_| ()).unwrap_err().to_string(),
            "no agent registered as `critic` (the registry is empty)"
        );
        assert_eq!(registry.agents(["writer", "critic"]).map(|_| ()).unwrap_err(), err);
    }

    #[test]
    fn names_are_unique_and_not_blank_and_merging_refuses_duplicates() {
        let registry = AgentRegistry::new();
        registry.register(agent("writer")).unwrap_or_else(|e| panic!("{e}"));
        let dup = registry.register(agent("writer")).unwrap_err();
        assert_eq!(dup.to_string(), "an agent is already registered as `writer`");
        assert_eq!(registry.register_as(" ", agent("x")).unwrap_err(), RegistryError::EmptyName);

        let remote = AgentRegistry::new();
        remote.register(agent("translator")).unwrap_or_else(|e| panic!("{e}"));
        remote.register(agent("writer")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(registry.merge(&remote).unwrap_err(), RegistryError::Duplicate("writer".into()));
        assert_eq!(registry.names(), ["writer"], "nothing added by a refused merge");
        assert!(remote.remove("writer").is_some());
        registry.merge(&remote).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(registry.names(), ["translator", "writer"]);
        // Clones share the registry.
        let shared = registry.clone();
        shared.register(agent("critic")).unwrap_or_else(|e| panic!("{e}"));
        assert!(registry.contains("critic"));
        assert_eq!(registry.len(), 3);
    }
}
