//! Per-step engine overhead, in memory, with no-op agents: a 1000-step sequence and a 1000-agent parallel
//! block (the shapes of the LangGraph harness in `../shared/bench/langgraph`: a chain of N nodes each writing
//! one key, and a static fan-out of K branches joined at the end); and the cost of an LLM step without the
//! model: a 5-step sequence of `LlmAgent`s (template, request, answer, output and context writes) over a model
//! that answers at once.
//!
//! Run: `cargo bench --bench engine_overhead`. Divide the reported time by the number of steps for the
//! per-step figure; docs/performance.md keeps the latest ratios.

use agentic::agents::model::{ChatMessage, ChatModel, ChatRequest, ChatResponse, FinishReason, ModelError, ModelInfo};
use agentic::engine::TokenUsage;
use agentic::prelude::*;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;

/// A no-op agent writing `value` to `key` (LangGraph's node returning `{key: value}`).
fn noop(i: usize, key: String) -> AgentRef {
    FnAgent::builder(format!("n{i}"), move |_ctx| Box::pin(async move { Ok(json!(i)) })).output_key(key).build()
}

fn chain(n: usize, distinct: bool) -> AgentRef {
    let agents = (0..n).map(|i| noop(i, if distinct { format!("k{i}") } else { "k".to_string() }));
    Sequence::builder().sub_agents(agents).build().expect("build")
}

fn fan_out(k: usize) -> AgentRef {
    let agents = (0..k).map(|i| noop(i, format!("k{i}")));
    Parallel::builder().sub_agents(agents).build().expect("build")
}

/// A model answering `ok` at once: what is left of an LLM step is the engine's and the agent's work.
struct Instant(ModelInfo);

impl ChatModel for Instant {
    fn info(&self) -> &ModelInfo {
        &self.0
    }

    async fn chat(&self, _request: ChatRequest) -> Result<ChatResponse, ModelError> {
        Ok(ChatResponse {
            message: ChatMessage::assistant("ok".to_string()),
            usage: TokenUsage { input: 8, output: 1 },
            finish_reason: FinishReason::Stop,
            logprobs: None,
        })
    }
}

fn llm_chain(n: usize) -> AgentRef {
    let info = ModelInfo {
        provider: "instant".into(),
        server: "in-process".into(),
        model: "ok".into(),
        json_schema: false,
        tools: false,
        prices: None,
        limits: Default::default(),
        name: None,
    };
    let model = ChatModelRef::new(Instant(info));
    let agents = (0..n).map(|i| {
        LlmAgent::builder(model.clone())
            .name(format!("llm{i}"))
            .user("Say ok to {{ input }}")
            .output_key(format!("k{i}"))
            .build()
            .expect("build")
    });
    Sequence::builder().sub_agents(agents).build().expect("build")
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let mut g = c.benchmark_group("sequence");
    for n in [100usize, 1000] {
        for distinct in [true, false] {
            let system = chain(n, distinct);
            g.throughput(Throughput::Elements(n as u64));
            let id = BenchmarkId::new(if distinct { "distinct" } else { "single" }, n);
            g.bench_with_input(id, &system, |b, s| {
                b.to_async(&rt).iter(|| async { s.invoke().await.expect("run") });
            });
        }
    }
    g.finish();
    let mut g = c.benchmark_group("parallel");
    for k in [100usize, 1000] {
        let system = fan_out(k);
        g.throughput(Throughput::Elements(k as u64));
        g.bench_with_input(BenchmarkId::new("fan_out", k), &system, |b, s| {
            b.to_async(&rt).iter(|| async { s.invoke().await.expect("run") });
        });
    }
    g.finish();
    let mut g = c.benchmark_group("llm_step");
    let system = llm_chain(5);
    g.throughput(Throughput::Elements(5));
    g.bench_with_input(BenchmarkId::new("sequence", 5), &system, |b, s| {
        b.to_async(&rt).iter(|| async { s.invoke().input("input", "bench").await.expect("run") });
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
