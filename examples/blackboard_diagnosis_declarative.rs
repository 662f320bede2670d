//! **Blackboard, declared** — the medical diagnosis of `blackboard_diagnosis.rs` with the declarative
//! attributes: the knowledge sources are LLM methods answering enums, the reviewer is a `#[human]` method asked
//! again whenever the diagnosis changes (`inputs("diagnosis")`), and the review is applied by a plain Rust
//! function returning a state update (`#[agent(update)]`: an approval, or more symptoms). The blackboard
//! prefers the drug check when the symptoms mention a medication (`prefer(agent = drugs, when = ..)`).
//!
//! ```text
//! cargo run --example blackboard_diagnosis_declarative -- --scripted    # canned replies and reviews
//! cargo run --features local --example blackboard_diagnosis_declarative # the local model; you review
//! ```
//!
//! Builder version: `examples/blackboard_diagnosis.rs` (same agents, same replies, same result).

use std::error::Error;

use agentic::prelude::*;
use serde::{Deserialize, Serialize};

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

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

/// What the lab results show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum LabAnalysis {
    /// Nothing abnormal.
    Normal,
    /// Signs of an infection.
    Infection,
    /// Signs of an inflammation.
    Inflammation,
}

/// Whether the medications explain or worsen the symptoms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DrugCheck {
    /// They may.
    Interaction,
    /// They do not.
    NoInteraction,
}

/// The diagnoses the agent chooses from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Diagnosis {
    /// Influenza.
    Flu,
    /// A migraine.
    Migraine,
    /// A sinus infection.
    Sinusitis,
}

/// The knowledge sources, the reviewer and the blackboard over them.
#[agents]
pub trait Diagnostics {
    /// Extracts the symptoms from the patient's account
    #[agent(
        user = "List the symptoms in this account, in a few words, and say if the patient takes a medication.\n\
                Account: {{ patient }}\nSymptoms:",
        max_tokens = 60,
        output_key = "symptoms"
    )]
    async fn symptoms(&self, patient: String) -> String;

    /// Analyzes the lab results
    // Runs once symptoms are known, and again when they change.
    #[agent(user = LAB, inputs("symptoms", "labResults"), output_key = "labAnalysis")]
    async fn lab(&self, #[key("labResults")] lab_results: String) -> LabAnalysis;

    /// Checks the medications against the symptoms
    #[agent(user = DRUGS, output_key = "drugInteraction")]
    async fn drugs(&self, symptoms: String, medications: String) -> DrugCheck;

    /// Diagnoses from the symptoms and the lab analysis
    #[agent(user = DIAGNOSE, output_key = "diagnosis")]
    async fn diagnose(&self, symptoms: String, #[key("labAnalysis")] lab: LabAnalysis) -> Diagnosis;

    /// A doctor approves the diagnosis or adds information
    #[human(
        prompt = "Diagnosis: {{ diagnosis }} (symptoms: {{ symptoms }}; lab: {{ labAnalysis }}; drugs: \
                  {{ drugInteraction | default('not checked') }}). Answer approved, or add what is missing.",
        inputs("diagnosis"),
        response_id = "review",
        output_key = "verdict"
    )]
    async fn review(&self) -> String;

    /// The diagnosis: the knowledge sources and the reviewer until a diagnosis is approved.
    #[blackboard(
        agents(symptoms, lab, drugs, diagnose, review, self::apply_review),
        prefer(agent = drugs, when = takes_medication),
        goal = approved,
        max_invocations = 20,
        output_key = "approvedDiagnosis"
    )]
    async fn diagnostics(
        &self,
        patient: String,
        #[key("labResults")] lab_results: String,
        medications: String,
    ) -> Diagnosis;
}

/// What a review changes on the blackboard: the approved diagnosis, or the symptoms with what the reviewer added.
#[derive(Debug, Serialize)]
pub struct ReviewApplied {
    /// Set when the reviewer approved.
    #[serde(rename = "approvedDiagnosis")]
    pub approved_diagnosis: Option<Diagnosis>,
    /// Set when the reviewer added information.
    pub symptoms: Option<String>,
}

/// Applies the review: an approval is the goal; anything else is added to the symptoms. Runs on a new verdict
/// only; the diagnosis and the symptoms are read as they are.
#[agent(update, inputs("verdict"))]
fn apply_review(verdict: String, diagnosis: Diagnosis, symptoms: String) -> ReviewApplied {
    if verdict.trim().eq_ignore_ascii_case("approved") {
        ReviewApplied { approved_diagnosis: Some(diagnosis), symptoms: None }
    } else {
        ReviewApplied { approved_diagnosis: None, symptoms: Some(format!("{symptoms}; {}", verdict.trim())) }
    }
}

/// Whether the symptoms mention a medication (then the drug check comes first).
fn takes_medication(view: &ScopeView) -> bool {
    view.get_as::<String>("symptoms").ok().flatten().is_some_and(|s| s.to_lowercase().contains("medication"))
}

/// Whether a diagnosis was approved: the goal.
fn approved(view: &ScopeView) -> bool {
    view.contains("approvedDiagnosis")
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

/// The agents, each asking its own model (the builder version's canned replies with `--scripted`).
pub fn diagnostics(scripted: bool) -> Result<DiagnosticsAgents, Box<dyn Error>> {
    Ok(DiagnosticsAgents::builder(model("symptoms", scripted)?)
        .lab_model(model("lab", scripted)?)
        .drugs_model(model("drugs", scripted)?)
        .diagnose_model(model("diagnose", scripted)?)
        .build()?)
}

/// Runs one diagnosis with its reviews and returns the transcript.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let mut outcome = diagnostics(scripted)?
        .diagnostics_agent()
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
    let approved = outcome.output().and_then(serde_json::Value::as_str).unwrap_or("none");
    transcript += &format!("approved diagnosis: {approved}");
    Ok(transcript)
}

/// The model `agent` asks: its canned replies with `--scripted`, else the default model.
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order (the same as `blackboard_diagnosis.rs`'s).
fn script(agent: &str) -> Vec<&'static str> {
    match agent {
        "symptoms" => vec!["headache, fever; on medication (ibuprofen)"],
        "lab" => vec!["INFLAMMATION", "INFLAMMATION"],
        "drugs" => vec!["NO_INTERACTION", "NO_INTERACTION"],
        "diagnose" => vec!["FLU", "SINUSITIS"],
        _ => vec![],
    }
}
