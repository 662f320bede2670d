//! **BDI** (belief-desire-intention) — the trading desk: four desires with priorities, each achievable and
//! satisfied by conditions on the state (the beliefs), each pursued by its own agents (the intention). The
//! planner pursues the highest-priority achievable, unsatisfied desire; when a `SELL` recommendation makes
//! "hedge risks" (priority 2) achievable, hedging comes before rebalancing, and a non-AI agent keeps
//! `hedgingStrategy` defined (`None` when hedging was not needed) so that rebalancing can always read it.
//!
//! The recommendation is one of five labels from a few-shot prompt (an enum), which the local model does
//! reliably; the analyses are short free text.
//!
//! ```text
//! cargo run --example bdi_trading -- --scripted        # canned replies, offline (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example bdi_trading     # the local model (scripts/setup-local-model.sh)
//! OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.2 cargo run --example bdi_trading
//! ```
//!
//! Spec version: `examples/specs/bdi.yaml`.

use std::error::Error;

use agentic::agents::OutputType;
use agentic::planners::{Bdi, Desire};
use agentic::prelude::*;
use serde_json::{Value, json};

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    // Canned replies with `--scripted` or AGENTIC_SCRIPTED=1, else a real model (see `common::scripted`).
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

const RECOMMEND: &str = "\
Give a trading recommendation for each market analysis: STRONG_BUY, BUY, HOLD, SELL or STRONG_SELL.

Analysis: Earnings beat expectations and rates are falling.
Recommendation: BUY

Analysis: Prices are flat and nothing is expected to change.
Recommendation: HOLD

Analysis: Yields are rising quickly and bond prices keep dropping.
Recommendation: SELL

Analysis: {{ marketAnalysis }}
Recommendation:";

/// The agents and the BDI composite pursuing the desires with them.
pub fn desk(scripted: bool) -> Result<AgentRef, Box<dyn Error>> {
    let llm = |name: &str, description: &str, user: &str, key: &str| -> Result<AgentRef, Box<dyn Error>> {
        Ok(LlmAgent::builder(model(name, scripted)?)
            .name(name)
            .description(description)
            .user(user)
            .max_tokens(100)
            .output_key(key)
            .build()?)
    };
    let analysis = llm(
        "analysis",
        "Analyzes market conditions",
        "Analyze the market data for this portfolio in two sentences.\nMarket: {{ marketData }}\nPortfolio: {{ portfolio }}",
        "marketAnalysis",
    )?;
    let recommend = LlmAgent::builder(model("recommend", scripted)?)
        .name("recommend")
        .description("Gives a trading recommendation")
        .user(RECOMMEND)
        .output(OutputType::Enum(["STRONG_BUY", "BUY", "HOLD", "SELL", "STRONG_SELL"].map(String::from).to_vec()))
        .output_key("recommendation")
        .build()?;
    let hedge = llm(
        "hedge",
        "Hedges against risks",
        "Recommend one hedging strategy for: {{ marketAnalysis }}",
        "hedgingStrategy",
    )?;
    let default_hedge = Compute::expression("default_hedge", "hedgingStrategy | default('None')")?
        .description("Keeps the hedging strategy, or sets it to None")
        .inputs(["recommendation"])
        .output_key("hedgingStrategy")
        .build();
    let rebalance = llm(
        "rebalance",
        "Rebalances the portfolio",
        "Suggest a rebalancing in one sentence.\nAnalysis: {{ marketAnalysis }}\nHedging strategy: {{ hedgingStrategy }}\n\
         Portfolio: {{ portfolio }}",
        "rebalancingPlan",
    )?;
    let liquidity = llm(
        "liquidity",
        "Maintains liquidity",
        "Assess the liquidity of this portfolio: {{ portfolio }}",
        "liquidityAssessment",
    )?;

    let is_sell = |view: &ScopeView| {
        Ok(view.get("recommendation").and_then(Value::as_str).is_some_and(|r| r == "SELL" || r == "STRONG_SELL"))
    };
    let desk = Bdi::builder()
        .name("trading")
        .desire(Desire::of_keys("analyze market", 1, "marketData", "recommendation", [analysis, recommend]))
        .desire(Desire::new("hedge risks", 2, |view| Ok(view.contains("hedgingStrategy")), [hedge]).achievable(is_sell))
        .desire(Desire::of_keys("rebalance portfolio", 1, "recommendation", "rebalancingPlan", [default_hedge, rebalance]))
        .desire(Desire::of_keys("maintain liquidity", 1, "portfolio", "liquidityAssessment", [liquidity]))
        .output(|view| {
            let get = |key: &str| view.get(key).cloned().unwrap_or_default();
            Ok(json!({"hedge": get("hedgingStrategy"), "plan": get("rebalancingPlan"), "liquidity": get("liquidityAssessment")}))
        })
        .build()?;
    Ok(desk)
}

/// Builds the desk, runs it on one market and returns the recommendation, the order the agents ran in and the
/// plans.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let outcome = desk(scripted)?
        .invoke()
        .input("marketData", "10-year yields up 80 basis points in a month; bond funds see record outflows")
        .input("portfolio", "60% bonds, 35% stocks, 5% cash")
        .await?;

    let order: Vec<String> =
        outcome.history().await?.into_iter().filter(|r| r.agent != "trading").map(|r| r.agent).collect();
    let state = outcome.state();
    let result = outcome.output().cloned().unwrap_or_default();
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    Ok(format!(
        "recommendation: {}\norder: {}\nhedge: {}\nplan: {}\nliquidity: {}",
        text(&state.get("recommendation").cloned().unwrap_or_default()),
        order.join(" -> "),
        text(&result["hedge"]),
        text(&result["plan"]),
        text(&result["liquidity"])
    ))
}

/// The model `agent` asks: its canned replies with `--scripted`, else the default model (the local one, or
/// the server at `OPENAI_BASE_URL`).
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order.
fn script(agent: &str) -> Vec<&'static str> {
    match agent {
        "analysis" => vec!["Yields are rising quickly and bond prices keep dropping; the portfolio is bond-heavy."],
        "recommend" => vec!["SELL"],
        "hedge" => vec!["Buy put options on the main bond fund."],
        "rebalance" => vec!["Move 20% from bonds to short-term treasuries and cash, keeping the puts."],
        "liquidity" => vec!["5% cash covers three months of withdrawals: liquid enough."],
        _ => vec![],
    }
}
