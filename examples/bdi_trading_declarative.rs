//! **BDI, declared** — the trading desk of `bdi_trading.rs` with the declarative attributes: the agents are
//! methods of a trait, the recommendation an enum, and a `#[bdi]` method lists the desires — each with its
//! priority, when it is achievable and satisfied (state keys, or functions over the state), and the agents
//! pursuing it. A plain Rust function (`#[agent]`) keeps `hedgingStrategy` defined when hedging was not needed.
//!
//! ```text
//! cargo run --example bdi_trading_declarative -- --scripted    # canned replies, offline (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example bdi_trading_declarative # the local model
//! ```
//!
//! Builder version: `examples/bdi_trading.rs` (same agents, same replies, same result).

use std::error::Error;

use agentic::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

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

/// A trading recommendation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Recommendation {
    /// Buy a lot.
    StrongBuy,
    /// Buy.
    Buy,
    /// Keep the positions.
    Hold,
    /// Sell.
    Sell,
    /// Sell a lot.
    StrongSell,
}

/// What the desk decided.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub struct Decision {
    /// The hedging strategy (`None` when hedging was not needed).
    pub hedge: String,
    /// The rebalancing plan.
    pub plan: String,
    /// The liquidity assessment.
    pub liquidity: String,
}

/// The desk's agents and the desires they pursue.
#[agents]
pub trait TradingDesk {
    /// Analyzes market conditions
    #[agent(
        user = "Analyze the market data for this portfolio in two sentences.\nMarket: {{ marketData }}\nPortfolio: \
                {{ portfolio }}",
        max_tokens = 100,
        output_key = "marketAnalysis"
    )]
    async fn analysis(&self, #[key("marketData")] market_data: String, portfolio: String) -> String;

    /// Gives a trading recommendation
    #[agent(user = RECOMMEND, output_key = "recommendation")]
    async fn recommend(&self, #[key("marketAnalysis")] market_analysis: String) -> Recommendation;

    /// Hedges against risks
    #[agent(
        user = "Recommend one hedging strategy for: {{ marketAnalysis }}",
        max_tokens = 100,
        output_key = "hedgingStrategy"
    )]
    async fn hedge(&self, #[key("marketAnalysis")] market_analysis: String) -> String;

    /// Rebalances the portfolio
    #[agent(
        user = "Suggest a rebalancing in one sentence.\nAnalysis: {{ marketAnalysis }}\nHedging strategy: \
                {{ hedgingStrategy }}\nPortfolio: {{ portfolio }}",
        max_tokens = 100,
        output_key = "rebalancingPlan"
    )]
    async fn rebalance(
        &self,
        #[key("marketAnalysis")] market_analysis: String,
        #[key("hedgingStrategy")] hedging_strategy: String,
        portfolio: String,
    ) -> String;

    /// Maintains liquidity
    #[agent(
        user = "Assess the liquidity of this portfolio: {{ portfolio }}",
        max_tokens = 100,
        output_key = "liquidityAssessment"
    )]
    async fn liquidity(&self, portfolio: String) -> String;

    /// The desk: the highest-priority achievable desire that is not yet satisfied, until none is left.
    #[bdi(
        desire(
            name = "analyze market",
            priority = 1,
            achievable_key = "marketData",
            satisfied_key = "recommendation",
            agents(analysis, recommend)
        ),
        desire(name = "hedge risks", priority = 2, achievable = is_sell, satisfied = is_hedged, agents(hedge)),
        desire(
            name = "rebalance portfolio",
            priority = 1,
            achievable_key = "recommendation",
            satisfied_key = "rebalancingPlan",
            agents(self::default_hedge, rebalance)
        ),
        desire(
            name = "maintain liquidity",
            priority = 1,
            achievable_key = "portfolio",
            satisfied_key = "liquidityAssessment",
            agents(liquidity)
        ),
        output = decision
    )]
    async fn trading(&self, #[key("marketData")] market_data: String, portfolio: String) -> Decision;
}

/// Keeps the hedging strategy, or sets it to None
#[agent(inputs("recommendation"), output_key = "hedgingStrategy")]
fn default_hedge(#[key("hedgingStrategy")] hedging: Option<String>) -> String {
    hedging.unwrap_or_else(|| "None".to_string())
}

/// Whether the recommendation is to sell: then hedging is achievable.
fn is_sell(view: &ScopeView) -> bool {
    matches!(view.get_as("recommendation"), Ok(Some(Recommendation::Sell | Recommendation::StrongSell)))
}

/// Whether a hedging strategy is chosen.
fn is_hedged(view: &ScopeView) -> bool {
    view.contains("hedgingStrategy")
}

/// The desk's result: the hedge, the plan and the liquidity assessment.
fn decision(view: &ScopeView) -> Result<Value, String> {
    let get = |key: &str| view.get(key).cloned().unwrap_or_default();
    Ok(
        json!({"hedge": get("hedgingStrategy"), "plan": get("rebalancingPlan"), "liquidity": get("liquidityAssessment")}),
    )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

/// The agents, each asking its own model (the builder version's canned replies with `--scripted`).
pub fn desk(scripted: bool) -> Result<TradingDeskAgents, Box<dyn Error>> {
    Ok(TradingDeskAgents::builder(model("analysis", scripted)?)
        .recommend_model(model("recommend", scripted)?)
        .hedge_model(model("hedge", scripted)?)
        .rebalance_model(model("rebalance", scripted)?)
        .liquidity_model(model("liquidity", scripted)?)
        .build()?)
}

/// Runs the desk on one market and returns the recommendation, the order the agents ran in and the plans.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let outcome = desk(scripted)?
        .trading_agent()
        .invoke()
        .input("marketData", "10-year yields up 80 basis points in a month; bond funds see record outflows")
        .input("portfolio", "60% bonds, 35% stocks, 5% cash")
        .await?;

    let order: Vec<String> =
        outcome.history().await?.into_iter().filter(|r| r.agent != "trading").map(|r| r.agent).collect();
    let recommendation: Option<Recommendation> = outcome.state().get_as("recommendation")?;
    let decision: Decision = serde_json::from_value(outcome.output().cloned().unwrap_or_default())?;
    Ok(format!(
        "recommendation: {}\norder: {}\nhedge: {}\nplan: {}\nliquidity: {}",
        recommendation.map(|r| json!(r).as_str().unwrap_or_default().to_string()).unwrap_or_default(),
        order.join(" -> "),
        decision.hedge,
        decision.plan,
        decision.liquidity
    ))
}

/// The model `agent` asks: its canned replies with `--scripted`, else the default model.
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order (the same as `bdi_trading.rs`'s).
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
