//! Every Rust example of the gallery (`examples/*.rs`) runs offline — its `--scripted` mode, canned model
//! replies and canned human answers — and prints exactly what it should. The example files are compiled into
//! this test as modules and their `run(scripted)` is called on a multi-threaded runtime, as their `main` does.

#![allow(clippy::unwrap_used)]
// Each example declares its own `mod common` (examples/common/mod.rs), so this test holds one copy per example.
#![allow(clippy::duplicate_mod)]

#[allow(dead_code)]
#[path = "../examples/story.rs"]
mod story;

#[allow(dead_code)]
#[path = "../examples/round_robin.rs"]
mod round_robin;

#[allow(dead_code)]
#[path = "../examples/story_declarative.rs"]
mod story_declarative;

#[allow(dead_code)]
#[path = "../examples/style_review.rs"]
mod style_review;

#[allow(dead_code)]
#[path = "../examples/evening_planner.rs"]
mod evening_planner;

#[allow(dead_code)]
#[path = "../examples/horoscope_mapper.rs"]
mod horoscope_mapper;

#[allow(dead_code)]
#[path = "../examples/expert_router.rs"]
mod expert_router;

#[allow(dead_code)]
#[path = "../examples/supervisor_bank.rs"]
mod supervisor_bank;

#[allow(dead_code)]
#[path = "../examples/goap_horoscope.rs"]
mod goap_horoscope;

#[allow(dead_code)]
#[path = "../examples/p2p_research.rs"]
mod p2p_research;

#[allow(dead_code)]
#[path = "../examples/blackboard_diagnosis.rs"]
mod blackboard_diagnosis;

#[allow(dead_code)]
#[path = "../examples/sentiment_voting.rs"]
mod sentiment_voting;

#[allow(dead_code)]
#[path = "../examples/ethics_debate.rs"]
mod ethics_debate;

#[allow(dead_code)]
#[path = "../examples/bdi_trading.rs"]
mod bdi_trading;

#[allow(dead_code)]
#[path = "../examples/decision_router.rs"]
mod decision_router;

#[allow(dead_code)]
#[path = "../examples/order_approval.rs"]
mod order_approval;

#[allow(dead_code)]
#[path = "../examples/style_review_declarative.rs"]
mod style_review_declarative;

#[allow(dead_code)]
#[path = "../examples/expert_router_declarative.rs"]
mod expert_router_declarative;

#[allow(dead_code)]
#[path = "../examples/evening_planner_declarative.rs"]
mod evening_planner_declarative;

#[allow(dead_code)]
#[path = "../examples/horoscope_mapper_declarative.rs"]
mod horoscope_mapper_declarative;

#[allow(dead_code)]
#[path = "../examples/sentiment_voting_declarative.rs"]
mod sentiment_voting_declarative;

#[allow(dead_code)]
#[path = "../examples/ethics_debate_declarative.rs"]
mod ethics_debate_declarative;

#[allow(dead_code)]
#[path = "../examples/goap_horoscope_declarative.rs"]
mod goap_horoscope_declarative;

#[allow(dead_code)]
#[path = "../examples/quickstart_declarative.rs"]
mod quickstart_declarative;

#[allow(dead_code)]
#[path = "../examples/bdi_trading_declarative.rs"]
mod bdi_trading_declarative;

#[allow(dead_code)]
#[path = "../examples/blackboard_diagnosis_declarative.rs"]
mod blackboard_diagnosis_declarative;

#[allow(dead_code)]
#[path = "../examples/decision_router_declarative.rs"]
mod decision_router_declarative;

#[allow(dead_code)]
#[path = "../examples/order_approval_declarative.rs"]
mod order_approval_declarative;

#[allow(dead_code)]
#[path = "../examples/p2p_research_declarative.rs"]
mod p2p_research_declarative;

#[allow(dead_code)]
#[path = "../examples/supervisor_bank_declarative.rs"]
mod supervisor_bank_declarative;

/// The examples this test runs (every example but the model-free quickstart, whose twin is run against it).
const EXAMPLES: &[&str] = &[
    "bdi_trading",
    "bdi_trading_declarative",
    "blackboard_diagnosis",
    "blackboard_diagnosis_declarative",
    "decision_router",
    "decision_router_declarative",
    "ethics_debate",
    "ethics_debate_declarative",
    "evening_planner",
    "evening_planner_declarative",
    "expert_router",
    "expert_router_declarative",
    "goap_horoscope",
    "goap_horoscope_declarative",
    "horoscope_mapper",
    "horoscope_mapper_declarative",
    "order_approval",
    "order_approval_declarative",
    "p2p_research",
    "p2p_research_declarative",
    "quickstart_declarative",
    "round_robin",
    "sentiment_voting",
    "sentiment_voting_declarative",
    "story",
    "story_declarative",
    "style_review",
    "style_review_declarative",
    "supervisor_bank",
    "supervisor_bank_declarative",
];

#[test]
fn every_example_is_run_here() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".rs").map(str::to_string))
        .filter(|n| n != "quickstart")
        .collect();
    found.sort();
    assert_eq!(found, EXAMPLES, "add the new example to this test");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn story_example() {
    let printed = story::run(true).await.unwrap();
    assert_eq!(
        printed,
        concat!(
            "writer: Mira, a wizard's apprentice, found a dragon egg in the library. It hatched during her exam.\n",
            "audience_editor: Mira, seventeen and always late, found a dragon egg between two spell books. It hatched mid-exam, and nobody believed her excuse.\n",
            "style_editor: In the vaulted library of Eldmoor, Mira the apprentice found a dragon egg among the grimoires. It hatched in a burst of emerald fire during her trial, and the old masters fell silent.\n",
            "story: In the vaulted library of Eldmoor, Mira the apprentice found a dragon egg among the grimoires. It hatched in a burst of emerald fire during her trial, and the old masters fell silent.",
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn story_declarative_example() {
    let printed = story_declarative::run(true).await.unwrap();
    assert_eq!(
        printed,
        "story: In the vaulted library of Eldmoor, Mira the apprentice found a dragon egg among the grimoires. It \
         hatched in a burst of emerald fire during her trial, and the old masters fell silent."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quickstart_declarative_example() {
    let printed = quickstart_declarative::run().await.unwrap();
    assert!(printed.starts_with("result: \"dragons: draft 3\"\nstate:  {"), "{printed}");
    assert!(printed.ends_with("  root     improve    -> \"dragons: draft 3\""), "{printed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn style_review_example() {
    let printed = style_review::run(true).await.unwrap();
    assert_eq!(
        printed,
        concat!(
            "scores: 0.4, 0.85\n",
            "story: The lighthouse keeper counted ships every night, mostly to annoy the seagulls. One night he counted one too many, and it winked back.",
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn style_review_declarative_example() {
    let printed = style_review_declarative::run(true).await.unwrap();
    assert_eq!(
        printed,
        "story: The lighthouse keeper counted ships every night, mostly to annoy the seagulls. One night he \
         counted one too many, and it winked back."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expert_router_declarative_example() {
    let printed = expert_router_declarative::run(true).await.unwrap();
    assert_eq!(
        printed,
        "request: I broke my leg, what should I do?\nresponse: Keep the leg still and raised, and put ice on it. Go \
         to an emergency room for an X-ray and a cast."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evening_planner_example() {
    let printed = evening_planner::run(true).await.unwrap();
    assert_eq!(
        printed,
        concat!(
            "plans for a romantic evening:\n",
            "1. Casablanca with Oysters with champagne\n",
            "2. Before Sunrise with Mushroom risotto\n",
            "3. La La Land with Chocolate fondue",
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evening_planner_declarative_example() {
    assert_eq!(evening_planner_declarative::run(true).await.unwrap(), evening_planner::run(true).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn horoscope_mapper_example() {
    let printed = horoscope_mapper::run(true).await.unwrap();
    assert_eq!(
        printed,
        concat!(
            "Mario (aries): Mario, your aries fire opens a door at work this week: walk through it.\n",
            "Luigi (pisces): Luigi, a pisces dream points to an old friend; call them before Friday.\n",
            "Peach (leo): Peach, leo confidence wins the room, but listen before you roar.",
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn horoscope_mapper_declarative_example() {
    assert_eq!(horoscope_mapper_declarative::run(true).await.unwrap(), horoscope_mapper::run(true).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expert_router_example() {
    let printed = expert_router::run(true).await.unwrap();
    assert_eq!(
        printed,
        concat!(
            "request: I broke my leg, what should I do?\n",
            "category: MEDICAL\n",
            "response: Keep the leg still and raised, and put ice on it. Go to an emergency room for an X-ray and a cast.",
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supervisor_bank_example() {
    let printed = supervisor_bank::run(true).await.unwrap();
    assert_eq!(
        printed,
        concat!(
            "exchange({\"originalCurrency\":\"EUR\",\"amount\":100,\"targetCurrency\":\"USD\"}) -> 115.0\n",
            "withdraw({\"user\":\"Mario\",\"amount\":115.0}) -> 885.0\n",
            "credit({\"user\":\"Georgios\",\"amount\":115.0}) -> 1115.0\n",
            "response: Transferred 100 EUR (115.00 USD) from Mario to Georgios.\n",
            "balances: Georgios 1115.00 USD, Mario 885.00 USD",
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goap_horoscope_example() {
    let printed = goap_horoscope::run(true).await.unwrap();
    assert_eq!(
        printed,
        concat!(
            "plan: person -> sign -> horoscope -> story -> writer\n",
            "Mario (pisces)\n",
            "Horoscope: Mario, the tide turns in your favour: say yes to the unexpected invitation.\n",
            "In the news: A plumber named Mario accepted a mystery invitation and won a lifetime supply of pipes.",
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goap_horoscope_declarative_example() {
    assert_eq!(
        goap_horoscope_declarative::run(true).await.unwrap(),
        concat!(
            "Mario (pisces)\n",
            "Horoscope: Mario, the tide turns in your favour: say yes to the unexpected invitation.\n",
            "In the news: A plumber named Mario accepted a mystery invitation and won a lifetime supply of pipes.",
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_research_example() {
    let printed = p2p_research::run(true).await.unwrap();
    assert_eq!(
        printed,
        concat!(
            "hypothesis: Primordial black holes from the early universe make up part of dark matter.\n",
            "score: 0.9",
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackboard_diagnosis_example() {
    let printed = blackboard_diagnosis::run(true).await.unwrap();
    assert_eq!(
        printed,
        concat!(
            "review: Diagnosis: FLU (symptoms: headache, fever; on medication (ibuprofen); lab: INFLAMMATION; drugs: NO_INTERACTION). Answer approved, or add what is missing.\n",
            "reviewer: she also has a blocked nose and pain behind the cheeks\n",
            "review: Diagnosis: SINUSITIS (symptoms: headache, fever; on medication (ibuprofen); she also has a blocked nose and pain behind the cheeks; lab: INFLAMMATION; drugs: NO_INTERACTION). Answer approved, or add what is missing.\n",
            "reviewer: approved\n",
            "approved diagnosis: SINUSITIS",
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentiment_voting_example() {
    let printed = sentiment_voting::run(true).await.unwrap();
    assert_eq!(
        printed,
        concat!(
            "text: The screen is gorgeous and setup took two minutes, though the box was dented.\n",
            "votes: general POSITIVE, tone POSITIVE, feedback NEUTRAL\n",
            "classification: POSITIVE",
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentiment_voting_declarative_example() {
    assert_eq!(
        sentiment_voting_declarative::run(true).await.unwrap(),
        "text: The screen is gorgeous and setup took two minutes, though the box was dented.\nclassification: Positive"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ethics_debate_example() {
    let printed = ethics_debate::run(true).await.unwrap();
    assert_eq!(
        printed,
        concat!(
            "question: Is it ethical to sell AI-generated art without saying that an AI made it?\n",
            "Utilitarian (round 1): Buyers are not harmed if the art pleases them, and sales fund artists. AGREE\n",
            "Utilitarian (round 2): Hidden origins erode trust in the whole market, which harms everyone. DISAGREE\n",
            "Deontologist (round 1): Selling without disclosure deceives the buyer about what they pay for. DISAGREE\n",
            "Deontologist (round 2): Deception stays wrong whatever the outcome. DISAGREE\n",
            "Pragmatist (round 1): Labels are cheap and avoid lawsuits and backlash later. DISAGREE\n",
            "Pragmatist (round 2): Disclosure is the practical norm markets are moving to. DISAGREE\n",
            "rounds: 2\n",
            "verdict: The panel converged: selling AI-generated art without disclosure is unethical. Sellers should label it, which costs little and keeps buyers' trust.",
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ethics_debate_declarative_example() {
    assert_eq!(
        ethics_debate_declarative::run(true).await.unwrap(),
        concat!(
            "question: Is it ethical to sell AI-generated art without saying that an AI made it?\n",
            "verdict: The panel converged: selling AI-generated art without disclosure is unethical. Sellers should label it, which costs little and keeps buyers' trust.",
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bdi_trading_example() {
    let printed = bdi_trading::run(true).await.unwrap();
    assert_eq!(
        printed,
        concat!(
            "recommendation: SELL\n",
            "order: analysis -> recommend -> hedge -> default_hedge -> rebalance -> liquidity\n",
            "hedge: Buy put options on the main bond fund.\n",
            "plan: Move 20% from bonds to short-term treasuries and cash, keeping the puts.\n",
            "liquidity: 5% cash covers three months of withdrawals: liquid enough.",
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decision_router_example() {
    let printed = decision_router::run(true).await.unwrap();
    assert_eq!(
        printed,
        concat!(
            "request: I broke my leg, what should I do?\n",
            "response: Keep the leg still and raised, and get an X-ray at an emergency room today.\n",
            "request: I broke my leg in a car accident caused by another driver: how should I take care of my leg, and can I sue the driver for damages?\n",
            "medical: Keep the leg still and raised, and get an X-ray at an emergency room today.\n",
            "legal: Yes: the other driver's insurer owes you damages; keep the police report and medical bills.",
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_approval_example() {
    let printed = order_approval::run(true).await.unwrap();
    assert_eq!(
        printed,
        concat!(
            "order-12345 is waiting for manager-approval: Ship 1000 widgets to ACME Corp? Answer approved or rejected.\n",
            "manager: approved\n",
            "order-12345: SHIPPED 1000 widgets to ACME Corp",
        )
    );
    // The twin after it: both use the memory id `order-12345`, which one process runs once at a time.
    assert_eq!(order_approval_declarative::run(true).await.unwrap(), printed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bdi_trading_declarative_example() {
    assert_eq!(bdi_trading_declarative::run(true).await.unwrap(), bdi_trading::run(true).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackboard_diagnosis_declarative_example() {
    assert_eq!(
        blackboard_diagnosis_declarative::run(true).await.unwrap(),
        blackboard_diagnosis::run(true).await.unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_research_declarative_example() {
    assert_eq!(p2p_research_declarative::run(true).await.unwrap(), p2p_research::run(true).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supervisor_bank_declarative_example() {
    assert_eq!(supervisor_bank_declarative::run(true).await.unwrap(), supervisor_bank::run(true).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decision_router_declarative_example() {
    let printed = decision_router_declarative::run(true).await.unwrap();
    // The answers of the fitting experts come by expert name (a `BTreeMap`).
    assert_eq!(
        printed,
        concat!(
            "request: I broke my leg, what should I do?\n",
            "response: Keep the leg still and raised, and get an X-ray at an emergency room today.\n",
            "request: I broke my leg in a car accident caused by another driver: how should I take care of my leg, and can I sue the driver for damages?\n",
            "legal: Yes: the other driver's insurer owes you damages; keep the police report and medical bills.\n",
            "medical: Keep the leg still and raised, and get an X-ray at an emergency room today.",
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_example() {
    assert_eq!(
        round_robin::run().await.unwrap(),
        "draft: \"A fox quick (round 1) jumps. quick (round 2)\"\nturns: adjective (root/0), ending (root/1), \
         adjective (root/0), room (root)"
    );
}
