//! From a `models` entry to a chat model: [`model_from_def`], the one place providers are chosen. A new
//! provider (e.g. `local` behind its cargo feature) adds an arm here.

use agentic_agents::model::{ChatModelRef, DEFAULT_OPENAI_MODEL, ModelError, OpenAiModel, ScriptedModel};

use crate::Secrets;
use crate::model::{ModelDef, ModelProvider};

/// What a `provider: local` model says in a build without the provider (the cargo feature `local`) when
/// `OPENAI_BASE_URL` is not set: the two ways out, the build that has it and the server that needs no build.
pub const LOCAL_NOT_BUILT: &str = "the local provider is not built into this binary: build with `--features local`, \
                                   or set OPENAI_BASE_URL to an OpenAI-compatible server to run this spec unchanged";

/// Builds the chat model a `models.<name>` entry describes, with its `prices` and `limits` (SPEC.md §3).
///
/// - `openai`: [`OpenAiModel`] with the entry's `base_url` (default: `OPENAI_BASE_URL`, else the official
///   API), `model` (default [`DEFAULT_OPENAI_MODEL`]), the API key — the secret `api_key` refers to
///   ([`Secrets::installed`]), else the variable `api_key_env` names (which must then be set), else
///   `OPENAI_API_KEY` if set — `temperature` and `max_tokens`; the other settings at the builder's defaults.
/// - `scripted`: [`ScriptedModel`] with the entry's `replies` (a reply written as
///   `{"tool_calls": [..]}` is a tool-call reply), named after the entry.
/// - `local`: `agentic_agents::model::local_model` with the entry's `model_path` (default: the file
///   `scripts/setup-local-model.sh` installs); needs the cargo feature `local`, else the error below.
///   **Override:** when `OPENAI_BASE_URL` is set (and not blank), a `local` entry is an [`OpenAiModel`] on that
///   server instead (with or without the feature), so the same spec runs against any OpenAI-compatible
///   server: model `OPENAI_MODEL` (default [`DEFAULT_OPENAI_MODEL`]), API key from `OPENAI_API_KEY`.
///
/// # Errors
/// [`ModelError::Unavailable`] for an `api_key` whose secret is not set or an `api_key_env` variable that is
/// not set (naming it), and for `local` in a build without the provider and without `OPENAI_BASE_URL`: its
/// message is [`LOCAL_NOT_BUILT`], the two ways out; [`ModelError::InvalidRequest`] when the OpenAI client cannot be created (e.g.
/// an API key with characters an HTTP header cannot carry).
pub fn model_from_def(def: &ModelDef) -> Result<ChatModelRef, ModelError> {
    let mut model = provider_model(def)?;
    if let Some(prices) = def.prices {
        model = model.with_prices(prices);
    }
    if !def.limits.is_empty() {
        model = model.with_limits(def.limits);
    }
    Ok(model)
}

/// The provider's model of `def`, without its prices and limits.
fn provider_model(def: &ModelDef) -> Result<ChatModelRef, ModelError> {
    match &def.provider {
        ModelProvider::OpenAi { base_url, model, api_key_env, api_key, temperature, max_tokens } => {
            let mut b = OpenAiModel::builder(model.clone().unwrap_or_else(|| DEFAULT_OPENAI_MODEL.to_string()));
            if let Some(url) = base_url {
                b = b.base_url(url.clone());
            }
            let unavailable = |message: String| ModelError::Unavailable { provider: "openai".to_string(), message };
            if let Some(reference) = api_key {
                // One reference and nothing else (parsing refuses any other `api_key`).
                let (key, used) =
                    Secrets::installed().resolve_used(reference).map_err(|e| unavailable(e.to_string()))?;
                b = match used.first() {
                    Some((name, _)) => b.api_key_secret(name.clone(), key),
                    None => b.api_key(key),
                };
            } else if let Some(var) = api_key_env {
                // Named by the spec, so the key is meant to be there: a call without it would go out
                // unauthenticated and fail at the server, or worse, succeed against the wrong account.
                if std::env::var(var).map_or(true, |v| v.trim().is_empty()) {
                    return Err(unavailable(format!(
                        "the environment variable `{var}` (its `api_key_env`) is not set: the API key is read from it"
                    )));
                }
                b = b.api_key_env(var.clone());
            }
            if let Some(t) = temperature {
                b = b.temperature(*t);
            }
            if let Some(m) = max_tokens {
                b = b.max_tokens(*m);
            }
            Ok(ChatModelRef::new(b.build()?))
        }
        ModelProvider::Scripted { replies, .. } => {
            Ok(ChatModelRef::new(ScriptedModel::new(replies.iter().map(String::as_str)).named(def.name.clone())))
        }
        ModelProvider::Local { model_path } => match local_override() {
            Some(base_url) => {
                let model = std::env::var("OPENAI_MODEL").ok().filter(|m| !m.trim().is_empty());
                let b = OpenAiModel::builder(model.unwrap_or_else(|| DEFAULT_OPENAI_MODEL.to_string()));
                Ok(ChatModelRef::new(b.base_url(base_url).build()?))
            }
            None if !agentic_agents::model::LOCAL_PROVIDER_BUILT => {
                Err(ModelError::Unavailable { provider: "local".to_string(), message: LOCAL_NOT_BUILT.to_string() })
            }
            None => agentic_agents::model::local_model(model_path.as_deref()),
        },
    }
}

/// Gets the models of `defs` ready to answer before any run needs them ([`ChatModelRef::prepare`]): a `local`
/// model loads its file, once for the process (the spec's agents share it), so that the first run's latency
/// does not include the load. The others have nothing to prepare.
///
/// # Errors
/// The first model that cannot be built or made ready, named: ``model `default`: <why>``.
pub async fn prepare_models(defs: &[ModelDef]) -> Result<(), String> {
    for def in defs {
        let named = |e: ModelError| format!("model `{}`: {e}", def.name);
        model_from_def(def).map_err(named)?.prepare().await.map_err(named)?;
    }
    Ok(())
}

/// What stands in for the model of `def` in a replay (SPEC.md §5) when this process cannot build it (a
/// `provider: local` entry in a build without the provider): a model that reports the name the provider's
/// model would report — so that the requests it is asked match the recording's — with the entry's prices and
/// limits, and answers nothing (a call the recording does not hold fails, saying the script is empty).
pub fn replay_stand_in(def: &ModelDef) -> ChatModelRef {
    let name = match &def.provider {
        ModelProvider::OpenAi { model, .. } => model.clone().unwrap_or_else(|| DEFAULT_OPENAI_MODEL.to_string()),
        ModelProvider::Scripted { .. } => def.name.clone(),
        ModelProvider::Local { model_path } => match local_override() {
            Some(_) => std::env::var("OPENAI_MODEL")
                .ok()
                .filter(|m| !m.trim().is_empty())
                .unwrap_or_else(|| DEFAULT_OPENAI_MODEL.to_string()),
            None => {
                let path = model_path
                    .as_deref()
                    .map(std::path::PathBuf::from)
                    .unwrap_or_else(agentic_agents::model::default_local_model_path);
                path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
            }
        },
    };
    // The capabilities of the local and OpenAI models: what an agent asks of the model depends on them.
    let stand_in = ScriptedModel::new(Vec::<&str>::new()).named(name).capabilities(true, true);
    let mut model = ChatModelRef::new(stand_in);
    if let Some(prices) = def.prices {
        model = model.with_prices(prices);
    }
    if !def.limits.is_empty() {
        model = model.with_limits(def.limits);
    }
    model
}

/// The decision model a `models.<name>` entry describes, when it is one of its own: a `scripted` entry with
/// `decisions` is an [`agentic_agents::decision::ScriptedDecisionModel`] named after the entry, giving the decisions in
/// order (each an object with one answer per question name, or the answer itself for a one-question
/// request). `None` for every other entry: a decision router then uses the entry's chat model as a decision
/// model ([`agentic_agents::decision::ChatDecisionModel`]).
pub fn decision_model_from_def(def: &ModelDef) -> Option<agentic_agents::decision::DecisionModelRef> {
    match &def.provider {
        ModelProvider::Scripted { decisions, .. } if !decisions.is_empty() => Some(
            agentic_agents::decision::ScriptedDecisionModel::new(decisions.iter().cloned())
                .named(def.name.clone())
                .into(),
        ),
        _ => None,
    }
}

/// The OpenAI-compatible server that replaces every `provider: local` entry: `OPENAI_BASE_URL` when it is set
/// and not blank.
fn local_override() -> Option<String> {
    std::env::var("OPENAI_BASE_URL").ok().filter(|u| !u.trim().is_empty())
}
