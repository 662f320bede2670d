//! **Blackboard** with a human reviewer — the medical diagnosis: knowledge sources post partial results to the
//! shared state (the blackboard); one agent runs per step, chosen among those whose inputs are present and
//! changed, preferring the drug-interaction check when the symptoms mention a medication. A human reviewer
//! reads each diagnosis: a rejection adds information to the symptoms, which re-triggers every agent reading
//! them; an approval records the approved diagnosis, which is the goal. The run suspends at every review and
//! resumes with the answer.
//!
//! The lab, drug and diagnosis agents classify into fixed labels from few-shot prompts (enums), which the local
//! model does reliably.
//!
//! ```text
//! cargo run --example blackboard_diagnosis -- --scripted    # canned replies and reviews (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example blackboard_diagnosis # the local model; at a terminal you review
//! OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.2 cargo run --example blackboard_diagnosis
//! ```
//!
//! Spec version (without the reviewer): `examples/specs/blackboard.yaml`.

use std::error::Error;

use agentic::agents::Human;
use agentic::agents::{OutputType, ScopeAction};
use agentic::engine::AgentSpec;
use agentic::planners::Blackboard;
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

const LAB: &str = "\
Read the lab results and answer NORMAL, INFECTION or INFLAMMATION.

Lab results: white cells 7.0, CRP 2
Analysis: NORMAL

Lab results: white cells 15.2, CRP 80, procalcitonin high
Analysis: INFECTION

Lab results: CRP 25, ESR raised, white cells normal
Analysis: INFLAMMATION

Lab results: {{ labResults }}
Analysis:";

const DRUGS: &str = "\
Say whether the medications can explain or worsen the symptoms: INTERACTION or NO_INTERACTION.

Symptoms: dizziness, low blood pressure. Medications: lisinopril, amlodipine
Check: INTERACTION

Symptoms: cough, runny nose. Medications: vitamin D
Check: NO_INTERACTION

Symptoms: {{ symptoms }}. Medications: {{ medications }}
Check:";

const DIAGNOSE: &str = "\
Give the most likely diagnosis: FLU, MIGRAINE or SINUSITIS.

Symptoms: fever, aching muscles, dry cough. Lab: INFECTION
Diagnosis: FLU

Symptoms: throbbing headache on one side, nausea, light hurts the eyes. Lab: NORMAL
Diagnosis: MIGRAINE

Symptoms: blocked nose, pain behind the cheeks, headache when bending. Lab: INFLAMMATION
Diagnosis: SINUSITIS

Symptoms: {{ symptoms }}. Lab: {{ labAnalysis }}
Diagnosis:";

fn labels(names: &[&str]) -> OutputType {
    OutputType::Enum(names.iter().map(|n| n.to_string()).collect())
}

/// The knowledge sources, the reviewer and the blackboard over them.
pub fn diagnostics(scripted: bool) -> Result<AgentRef, Box<dyn Error>> {
    let symptoms = LlmAgent::builder(model("symptoms", scripted)?)
        .name("symptoms")
        .description("Extracts the symptoms from the patient's account")
        .user(
            "List the symptoms in this account, in a few words, and say if the patient takes a medication.\n\
               Account: {{ patient }}\nSymptoms:",
        )
        .max_tokens(60)
        .output_key("symptoms")
        .build()?;
    let lab = LlmAgent::builder(model("lab", scripted)?)
        .name("lab")
        .description("Analyzes the lab results")
        .user(LAB)
        .inputs(["symptoms", "labResults"]) // runs once symptoms are known, and again when they change
        .output(labels(&["NORMAL", "INFECTION", "INFLAMMATION"]))
        .output_key("labAnalysis")
        .build()?;
    let drugs = LlmAgent::builder(model("drugs", scripted)?)
        .name("drugs")
        .description("Checks the medications against the symptoms")
        .user(DRUGS)
        .output(labels(&["INTERACTION", "NO_INTERACTION"]))
        .output_key("drugInteraction")
        .build()?;
    let diagnose = LlmAgent::builder(model("diagnose", scripted)?)
        .name("diagnose")
        .description("Diagnoses from the symptoms and the lab analysis")
        .user(DIAGNOSE)
        .output(labels(&["FLU", "MIGRAINE", "SINUSITIS"]))
        .output_key("diagnosis")
        .build()?;
    let review = Human::builder(
        "review",
        "Diagnosis: {{ diagnosis }} (symptoms: {{ symptoms }}; lab: {{ labAnalysis }}; drugs: \
         {{ drugInteraction | default('not checked') }}). Answer approved, or add what is missing.",
    )?
    .description("A doctor approves the diagnosis or adds information")
    .inputs(["diagnosis"]) // asked again whenever the diagnosis changes
    .response_id("review")
    .output_key("verdict")
    .build();
    // Applies the review: an approval is the goal; anything else is added to the symptoms.
    let mut apply = AgentSpec::new("apply_review", "scope_action");
    apply.inputs = vec![InputSpec::new("verdict")];
    let apply_review = ScopeAction::with_spec(apply, |view| {
        let text = |key: &str| view.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
        let verdict = text("verdict");
        if verdict.trim().eq_ignore_ascii_case("approved") {
            Ok(vec![("approvedDiagnosis".to_string(), json!(text("diagnosis")))])
        } else {
            Ok(vec![("symptoms".to_string(), json!(format!("{}; {}", text("symptoms"), verdict.trim())))])
        }
    });

    let diagnostics = Blackboard::builder()
        .name("diagnostics")
        .sub_agents([symptoms, lab, drugs, diagnose, review, apply_review])
        .prefer("drugs", |view| {
            Ok(view.get("symptoms").and_then(Value::as_str).is_some_and(|s| s.to_lowercase().contains("medication")))
        })
        .goal_when(|view| view.contains("approvedDiagnosis"))
        .max_invocations(20)
        .output_key("approvedDiagnosis")
        .build()?;
    Ok(diagnostics)
}

/// Builds the blackboard, runs one diagnosis with its reviews and returns the transcript.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let mut outcome = diagnostics(scripted)?
        .invoke()
        .input("patient", "Ada, 34: headache and fever for two days; she takes ibuprofen for the pain.")
        .input("labResults", "CRP 25, ESR raised, white cells normal")
        .input("medications", "ibuprofen")
        .await?;

    let mut transcript = String::new();
    let mut canned = ["she also has a blocked nose and pain behind the cheeks", "approved"].into_iter();
    while outcome.is_suspended() {
        let (id, prompt) = (outcome.pending()[0].id.clone(), outcome.pending()[0].prompt.clone());
        // The reviewer types the answer at a terminal when a model runs, else the canned one is used.
        let answer = common::ask(&prompt, canned.next().unwrap_or("approved"), scripted)?;
        transcript += &format!("review: {prompt}\nreviewer: {answer}\n");
        outcome = outcome.resume().answer(id, answer).await?;
    }
    transcript += &format!("approved diagnosis: {}", outcome.output().and_then(Value::as_str).unwrap_or("none"));
    Ok(transcript)
}

/// The model `agent` asks: its canned replies with `--scripted`, else the default model (the local one, or
/// the server at `OPENAI_BASE_URL`).
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order.
fn script(agent: &str) -> Vec<&'static str> {
    match agent {
        "symptoms" => vec!["headache, fever; on medication (ibuprofen)"],
        "lab" => vec!["INFLAMMATION", "INFLAMMATION"],
        "drugs" => vec!["NO_INTERACTION", "NO_INTERACTION"],
        "diagnose" => vec!["FLU", "SINUSITIS"],
        _ => vec![],
    }
}
