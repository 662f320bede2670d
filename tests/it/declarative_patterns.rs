//! The pattern planners declared on an `#[agents]` trait over `#[agent]` functions (no model): parallel
//! mapper, GOAP, P2P, blackboard, voting and debate, each a typed entry point; `#[key("..")]` names a
//! parameter's state key.

#![allow(clippy::unwrap_used)]

use agentic::planners::Vote;
use agentic::prelude::*;
use serde_json::{Value, json};

/// Greets a person.
#[agent(output_key = "greeting")]
async fn greet(person: String) -> String {
    format!("hello {person}")
}

/// The prompt's person, in capitals.
#[agent(output_key = "person")]
async fn person(prompt: String) -> String {
    prompt.to_uppercase()
}

/// The prompt's sign.
#[agent(output_key = "sign")]
async fn sign(prompt: String) -> String {
    let _ = prompt;
    "pisces".to_string()
}

/// A person and their sign.
#[agent(output_key = "writeup")]
async fn write(person: String, sign: String) -> String {
    format!("{person} is a {sign}")
}

/// Findings on a topic.
#[agent(output_key = "findings")]
async fn literature(topic: String) -> String {
    format!("findings on {topic}")
}

/// A hypothesis from findings.
#[agent(output_key = "hypothesis")]
async fn hypothesis(findings: String) -> String {
    format!("H({findings})")
}

fn has_hypothesis(view: &ScopeView) -> bool {
    view.contains("hypothesis")
}

/// Votes positive.
#[agent(output_key = "vote_a")]
async fn optimist(text: String) -> String {
    let _ = text;
    "POSITIVE".to_string()
}

/// Votes negative.
#[agent(output_key = "vote_b")]
async fn pessimist(text: String) -> String {
    let _ = text;
    "NEGATIVE".to_string()
}

/// Votes positive too.
#[agent(output_key = "vote_c")]
async fn realist(text: String) -> String {
    let _ = text;
    "POSITIVE".to_string()
}

fn voters_in_order(votes: &[Vote]) -> Result<Value, String> {
    Ok(json!(votes.iter().map(|v| format!("{}={}", v.voter, v.value)).collect::<Vec<_>>().join(",")))
}

/// Agrees.
#[agent(output_key = "pro_says")]
async fn pro() -> String {
    "AGREE".to_string()
}

/// Agrees as well.
#[agent(output_key = "con_says")]
async fn con() -> String {
    "AGREE".to_string()
}

/// Decides on the debate's context.
#[agent(output_key = "verdict")]
async fn judge(#[key("debateContext")] context: String) -> String {
    format!("verdict on: {context}")
}

/// The pattern planners as typed entry points.
#[agents]
pub trait Patterns {
    /// Greets everyone.
    #[parallel_mapper(agent = self::greet, items_key = "people", output_key = "greetings")]
    async fn greet_all(&self, people: Vec<String>) -> Vec<String>;

    /// From a prompt to a writeup, planned backwards from the goal.
    #[goap(agents(self::write, self::person, self::sign), output_key = "writeup")]
    async fn writeup(&self, prompt: String) -> String;

    /// Research by peers.
    #[p2p(agents(self::hypothesis, self::literature), exit = has_hypothesis, output_key = "hypothesis")]
    async fn research(&self, topic: String) -> String;

    /// The same on a blackboard.
    #[blackboard(agents(self::hypothesis, self::literature), goal = has_hypothesis, output_key = "hypothesis")]
    async fn board(&self, topic: String) -> String;

    /// The majority's sentiment.
    #[voting(agents(self::optimist, self::pessimist, self::realist), output_key = "sentiment")]
    async fn sentiment(&self, text: String) -> String;

    /// Every vote, by a custom aggregation.
    #[voting(agents(self::optimist, self::pessimist), aggregate = voters_in_order, output_key = "tally")]
    async fn tally(&self, text: String) -> String;

    /// Two debaters and a judge.
    #[debate(debaters(self::pro, self::con), judge = self::judge, max_rounds = 2, output_key = "verdict")]
    async fn panel(&self) -> String;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pattern_planners_are_typed_entry_points() {
    let patterns = PatternsAgents::builder(ScriptedModel::new(Vec::<String>::new())).build().unwrap();
    assert_eq!(
        patterns.greet_all(vec!["Ada".to_string(), "Alan".to_string()]).await.unwrap(),
        ["hello Ada", "hello Alan"]
    );
    assert_eq!(patterns.writeup("mario").await.unwrap(), "MARIO is a pisces");
    assert_eq!(patterns.research("black holes").await.unwrap(), "H(findings on black holes)");
    assert_eq!(patterns.board("black holes").await.unwrap(), "H(findings on black holes)");
    assert_eq!(patterns.sentiment("what a day").await.unwrap(), "POSITIVE");
    assert_eq!(patterns.tally("what a day").await.unwrap(), "optimist=\"POSITIVE\",pessimist=\"NEGATIVE\"");
    assert_eq!(patterns.panel().await.unwrap(), "verdict on: pro: \"AGREE\"\ncon: \"AGREE\"");
    let judge = judge_agent();
    assert_eq!(judge.spec().inputs[0].key, "debateContext");
    let kinds: Vec<String> = ["greet_all", "writeup", "research", "board", "sentiment", "panel"]
        .iter()
        .map(|m| match *m {
            "greet_all" => patterns.greet_all_agent(),
            "writeup" => patterns.writeup_agent(),
            "research" => patterns.research_agent(),
            "board" => patterns.board_agent(),
            "sentiment" => patterns.sentiment_agent(),
            _ => patterns.panel_agent(),
        })
        .map(|a| a.spec().kind.clone())
        .collect();
    assert_eq!(kinds, ["parallel_mapper", "goap", "p2p", "blackboard", "voting", "debate"]);
}
