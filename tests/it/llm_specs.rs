//! The LLM workflows of the examples run from their specs: the story (writer → audience editor → style
//! editor) and the style-review loop (scorer + editor until the score reaches 0.8), with the specs' scripted
//! models, with a scripted model substituted (to check every prompt), and against a loopback
//! OpenAI-compatible server. Then the located errors of the `llm` kind and the `models` section.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use agentic::agents::model::{ChatModelRef, OpenAiModel, ScriptedModel};
use agentic::spec::Spec;
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

// bodies: the JSON requests a loopback server received.
use crate::common;
use common::bodies;

fn spec(name: &str) -> Spec {
    Spec::from_path(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/specs").join(name)).expect("valid spec")
}

const STORY_3: &str = "In the vaulted library of Eldmoor, Mira the apprentice found a dragon egg among the grimoires. It \
                       hatched in a burst of emerald fire during her trial, and the old masters fell silent.";

#[tokio::test]
async fn the_story_spec_runs_three_llm_agents_in_sequence_with_its_scripted_model() {
    let built = spec("story.yaml").build().expect("build");
    let outcome = built
        .root
        .invoke()
        .input("topic", "dragons and wizards")
        .input("audience", "young adults")
        .input("style", "fantasy")
        .await
        .expect("run");
    assert_eq!(outcome.output(), Some(&json!(STORY_3)));
    let history = outcome.history().await.expect("history");
    let llm_calls: Vec<&str> = history.iter().filter(|r| r.tokens.is_some()).map(|r| r.agent.as_str()).collect();
    assert_eq!(llm_calls, ["writer", "audience_editor", "style_editor"]);
}

fn messages(model: &ScriptedModel) -> Vec<Vec<(String, String)>> {
    model
        .requests()
        .iter()
        .map(|r| r.messages.iter().map(|m| (m.role().to_string(), m.text().to_string())).collect())
        .collect()
}

fn pair(role: &str, text: &str) -> (String, String) {
    (role.to_string(), text.to_string())
}

#[tokio::test]
async fn the_story_spec_renders_every_prompt_from_the_state() {
    let model = ScriptedModel::new(["Draft.", "Draft for teens.", "Fantasy draft for teens."]);
    let built = spec("story.yaml")
        .build_with_models([("default".to_string(), ChatModelRef::new(model.clone()))])
        .expect("build");
    let outcome = built
        .root
        .invoke()
        .input("topic", "dragons")
        .input("audience", "teenagers")
        .input("style", "fantasy")
        .await
        .expect("run");
    assert_eq!(outcome.output(), Some(&json!("Fantasy draft for teens.")));
    assert_eq!(
        messages(&model),
        [
            vec![
                pair("system", "You write short fiction."),
                pair("user", "Write a story of at most three sentences about dragons.\nReply with the story only.")
            ],
            vec![
                pair("system", "You are an editor."),
                pair(
                    "user",
                    "Rewrite this story so that it suits teenagers. Reply with the story only.\nStory: Draft."
                )
            ],
            vec![
                pair("system", "You are an editor."),
                pair(
                    "user",
                    "Rewrite this story in the fantasy style, keeping it coherent. Reply with the story only.\nStory: \
                     Draft for teens."
                )
            ],
        ]
    );
}

#[tokio::test]
async fn the_style_review_loop_edits_until_the_score_reaches_the_threshold() {
    let built = spec("style_review.yaml").build().expect("build");
    let outcome =
        built.root.invoke().input("topic", "a lighthouse keeper").input("style", "comedy").await.expect("run");
    assert_eq!(
        outcome.output(),
        Some(&json!(
            "The lighthouse keeper counted ships every night, mostly to annoy the seagulls. One night he counted one \
             too many, and it winked back."
        ))
    );
    assert_eq!(outcome.state().get("score"), Some(&json!(0.85)));

    // A substituted script that needs three rounds: the loop scores, edits, scores, edits, scores.
    let model = ScriptedModel::new(["v1", "Score: 0.3", "v2", "0.6 I think", "v3", "Score: 0.9"]);
    let built = spec("style_review.yaml")
        .build_with_models([("default".to_string(), ChatModelRef::new(model.clone()))])
        .expect("build");
    let outcome = built.root.invoke().input("topic", "t").input("style", "noir").await.expect("run");
    assert_eq!(outcome.output(), Some(&json!("v3")));
    assert_eq!(outcome.state().get("score"), Some(&json!(0.9)));
    assert_eq!(model.used(), 6);
    let sent = messages(&model);
    assert_eq!(
        sent[3][1].1,
        "How well does this story fit the noir style? Give a score between 0.0 and 1.0.\nReply with the score \
         only.\nStory: v2"
    );
}

/// Answers with the given chat completions in order (the last one repeats).
struct InOrder(Mutex<VecDeque<String>>);

impl InOrder {
    fn new(contents: &[&str]) -> Self {
        InOrder(Mutex::new(contents.iter().map(|s| s.to_string()).collect()))
    }
}

impl Respond for InOrder {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let mut q = self.0.lock().expect("lock");
        let content =
            if q.len() > 1 { q.pop_front().unwrap_or_default() } else { q.front().cloned().unwrap_or_default() };
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "c", "object": "chat.completion", "model": "gpt-test",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 4}
        }))
    }
}

async fn loopback(contents: &[&str]) -> (MockServer, ChatModelRef) {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(InOrder::new(contents)).mount(&server).await;
    let model = OpenAiModel::builder("gpt-test")
        .base_url(format!("{}/v1", server.uri()))
        .api_key("sk-loopback")
        .backoff(Duration::from_millis(10))
        .build()
        .expect("model");
    (server, ChatModelRef::new(model))
}

#[tokio::test]
async fn the_story_spec_runs_against_an_openai_compatible_server() {
    let (server, model) = loopback(&["Draft.", "Draft for teens.", "Fantasy draft for teens."]).await;
    let built = spec("story.yaml").build_with_models([("default".to_string(), model)]).expect("build");
    let outcome = built
        .root
        .invoke()
        .input("topic", "dragons")
        .input("audience", "teenagers")
        .input("style", "fantasy")
        .await
        .expect("run");
    assert_eq!(outcome.output(), Some(&json!("Fantasy draft for teens.")));
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 3);
    assert_eq!(
        sent[1],
        json!({
            "model": "gpt-test",
            "messages": [
                {"role": "system", "content": "You are an editor."},
                {"role": "user", "content": "Rewrite this story so that it suits teenagers. Reply with the story only.\nStory: Draft."}
            ],
            "stream": false
        })
    );
    let history = outcome.history().await.expect("history");
    let tokens: u64 = history.iter().filter_map(|r| r.tokens).map(|t| t.input + t.output).sum();
    assert_eq!(tokens, 3 * 14);
}

#[tokio::test]
async fn the_style_review_spec_runs_against_an_openai_compatible_server() {
    let (server, model) = loopback(&["v1", "{\"value\": 0.4}", "v2", "{\"value\": 0.85}"]).await;
    let built = spec("style_review.yaml").build_with_models([("default".to_string(), model)]).expect("build");
    let outcome = built.root.invoke().input("topic", "t").input("style", "comedy").await.expect("run");
    assert_eq!(outcome.output(), Some(&json!("v2")));
    assert_eq!(outcome.state().get("score"), Some(&json!(0.85)));
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 4);
    assert_eq!(sent[0].get("response_format"), None, "a string output asks for free text");
    assert_eq!(
        sent[1]["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "answer", "strict": true, "schema": {
            "type": "object", "properties": {"value": {"type": "number"}},
            "required": ["value"], "additionalProperties": false}}})
    );
}

#[test]
fn the_cli_runs_the_story_spec() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentic"))
        .args(["run", "examples/specs/story.yaml", "--input", "topic=dragons", "--input", "audience=kids"])
        .args(["--input", "style=fantasy", "--store"])
        .arg(dir.path())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run the CLI");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim_end(), STORY_3);
}

fn errors(text: &str) -> Vec<String> {
    match Spec::parse(text, "spec.yaml") {
        Ok(_) => Vec::new(),
        Err(e) => e.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn llm_fields_are_checked_with_locations() {
    let text = r#"version: 1
root: s
models:
  fast: { provider: scripted, replies: ["x"] }
agents:
  s: { kind: sequence, agents: [a, b, c, d, e, f] }
  a: { kind: llm, user: "hi" }
  b: { kind: llm, model: fsat, user: "hi" }
  c: { kind: llm, model: fast, user: "hi", output: decimal }
  d: { kind: llm, model: fast, user: "hi", output: { enum: [] }, memory: { window: 0 } }
  e: { kind: llm, model: fast, user: "{{ oops", context: { summarized: [nobody] } }
  f: { kind: llm, model: fast, user: "hi", tools: [search], output: { schema: 3 } }
"#;
    assert_eq!(
        errors(text),
        [
            "spec.yaml:7:3: agent `a`: field `model`: an llm agent without `model` uses `default`, which is not \
             defined; defined models: `fast`",
            "spec.yaml:8:26: agent `b`: field `model`: unknown model `fsat` (did you mean `fast`?); defined models: \
             `fast`",
            "spec.yaml:9:52: agent `c`: field `output`: unknown output type `decimal`, expected `string`, `number`, \
             `integer`, `boolean`, `json`, `{enum: [..]}` or `{schema: {..}}`",
            "spec.yaml:10:60: agent `d`: field `output.enum`: must list at least one name",
            "spec.yaml:10:84: agent `d`: field `memory.window`: must be at least 1, found 0",
            "spec.yaml:11:38: agent `e`: field `user`: invalid template: syntax error: unexpected end of input, \
             expected end of variable block",
            "spec.yaml:11:73: agent `e`: field `context.summarized`: unknown agent `nobody`; defined agents: `a`, \
             `b`, `c`, `d`, `e`, `f`, `s`",
            "spec.yaml:12:52: agent `f`: field `tools[0]`: expected a mapping, found a string",
            "spec.yaml:12:79: agent `f`: field `output.schema`: expected a JSON schema mapping, found an integer",
        ]
    );
}

#[test]
fn a_missing_user_message_and_unknown_fields_are_reported() {
    let text =
        "version: 1\nroot: a\nmodels:\n  default: { provider: scripted }\nagents:\n  a: { kind: llm, sytem: x }\n";
    assert_eq!(
        errors(text),
        [
            "spec.yaml:6:6: agent `a`: missing field `user`",
            "spec.yaml:6:19: agent `a`: unknown field `sytem` (did you mean `system`?), expected one of `kind`, \
             `description`, `inputs`, `output_key`, `optional`, `async`, `timeout_ms`, `budget`, `model`, `system`, `user`, \
             `output`, `memory`, `context`, `tools`, `max_tool_iterations`, `tool_choice`, `temperature`, `max_tokens`, \
             `stream`, `confidence_key`, `scores_key`",
        ]
    );
}

#[test]
fn the_local_provider_is_a_clear_build_error_until_it_is_built_in() {
    let text = "version: 1\nroot: a\nmodels:\n  default: { provider: local }\nagents:\n  a: { kind: llm, user: hi }\n";
    let spec = Spec::parse(text, "spec.yaml").expect("valid: the model is only built on build");
    let e = spec.build().expect_err("not built in");
    assert_eq!(
        e.to_string(),
        "spec.yaml:6:3: agent `a`: field `model`: model `default`: the local provider is not built into this binary: \
         build with `--features local`, or set OPENAI_BASE_URL to an OpenAI-compatible server to run this spec \
         unchanged"
    );
    // Its topology needs no model: drawn in this build all the same.
    let topology = spec.topology().expect("no provider needed");
    assert_eq!((topology.spec.name.as_str(), topology.spec.kind.as_str()), ("a", "llm"));
}

#[test]
fn a_specs_topology_is_its_builds_for_every_gallery_spec_that_builds() {
    let gallery = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/specs");
    let mut compared = 0;
    for entry in std::fs::read_dir(&gallery).expect("the gallery") {
        let path = entry.expect("an entry").path();
        let spec = Spec::from_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let topology = spec.topology().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // A spec whose models this build cannot make (`provider: local`) has its topology only.
        if let Ok(built) = spec.build() {
            assert_eq!(built.root.topology().fingerprint(), topology.fingerprint(), "{}", path.display());
            compared += 1;
        }
    }
    assert!(compared >= 12, "{compared} gallery specs built here");
}

#[tokio::test]
async fn spec_outputs_enum_and_schema_are_parsed() {
    let text = r#"version: 1
root: s
models:
  default: { provider: scripted, replies: ["legal", "```json\n{\"city\": \"Paris\", \"days\": 3}\n```"] }
agents:
  s: { kind: sequence, agents: [route, plan] }
  route: { kind: llm, user: "Route {{ q }}", output: { enum: [MEDICAL, LEGAL] }, output_key: category }
  plan:
    kind: llm
    user: "Plan {{ q }}"
    output:
      schema: { type: object, required: [city, days], properties: { city: { type: string }, days: { type: integer } } }
    output_key: plan
"#;
    let built = Spec::parse(text, "spec.yaml").expect("valid").build().expect("build");
    let outcome = built.root.invoke().input("q", "a trip").await.expect("run");
    assert_eq!(outcome.state().get("category"), Some(&json!("LEGAL")));
    assert_eq!(outcome.state().get("plan"), Some(&json!({"city": "Paris", "days": 3})));
}

const ORDER_SPEC: &str = r#"version: 1
root: support
models:
  default: { provider: scripted }
agents:
  support:
    kind: llm
    user: "Customer asks: {{ question }}"
    max_tool_iterations: 3
    tools:
      - name: order_status
        description: The shipping status of an order
        parameters: { order_id: string }
        value: "orders[order_id] if order_id in orders else 'unknown order ' ~ order_id"
      - name: quote
        description: The price of a quantity of items
        parameters:
          quantity: integer
          unit: { type: number, description: "price of one item, in EUR" }
        template: "{{ quantity }} x {{ unit }} EUR = {{ quantity * unit }} EUR"
    output_key: answer
"#;

#[tokio::test]
async fn spec_tools_are_offered_to_the_model_and_run_over_the_state_and_the_arguments() {
    let model = ScriptedModel::new([
        r#"{"tool_calls": [{"name": "order_status", "arguments": {"order_id": "A42"}},
                          {"name": "quote", "arguments": {"quantity": 3, "unit": 2.5}}]}"#,
        r#"{"tool_calls": [{"name": "order_status", "arguments": {"order": "B7"}},
                          {"name": "quote", "arguments": {"quantity": 1, "unit": 2, "orders": {}}}]}"#,
        "Your order A42 has shipped; three more cost 7.5 EUR.",
    ]);
    let built = Spec::parse(ORDER_SPEC, "support.yaml")
        .expect("valid spec")
        .build_with_models([("default".to_string(), ChatModelRef::new(model.clone()))])
        .expect("build");
    let outcome = built
        .root
        .invoke()
        .input("question", "Where is my order A42?")
        .input("orders", json!({"A42": "shipped", "B7": "packed"}))
        .await
        .expect("run");
    assert_eq!(outcome.output(), Some(&json!("Your order A42 has shipped; three more cost 7.5 EUR.")));

    let requests = model.requests();
    let tools: Vec<Value> = requests[0]
        .tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
        .collect();
    assert_eq!(
        tools,
        [
            json!({"name": "order_status", "description": "The shipping status of an order", "parameters": {
                "type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"],
                "additionalProperties": false}}),
            json!({"name": "quote", "description": "The price of a quantity of items", "parameters": {
                "type": "object",
                "properties": {"quantity": {"type": "integer"},
                               "unit": {"type": "number", "description": "price of one item, in EUR"}},
                "required": ["quantity", "unit"],
                "additionalProperties": false}}),
        ]
    );
    // The results of the first round, in call order; the second round's mistake is fed back as an error.
    let tool_results = |i: usize| -> Vec<String> {
        requests[i].messages.iter().filter(|m| m.role() == "tool").map(|m| m.text().to_string()).collect()
    };
    assert_eq!(tool_results(1), ["shipped", "3 x 2.5 EUR = 7.5 EUR"]);
    let second = tool_results(2);
    assert_eq!(second.len(), 4);
    assert!(second[2].starts_with("error: ") && second[2].contains("order_id"), "{}", second[2]);
    // An argument the parameters do not name is refused (it would shadow the state key `orders`).
    assert_eq!(second[3], "error: the call has an unknown field `orders` (the fields are: quantity, unit)");
}

#[test]
fn spec_tool_errors_are_located() {
    let text = r#"version: 1
root: a
models:
  default: { provider: scripted }
agents:
  a:
    kind: llm
    user: hi
    max_tool_iterations: 0
    tools:
      - name: "bad name"
        value: "1"
      - name: twin
        parameters: { x: text, y: 3 }
        value: "x +"
      - name: twin
        value: "1"
        template: "2"
      - name: empty
        descripton: nothing
      - search
"#;
    assert_eq!(
        errors(text),
        [
            "spec.yaml:9:26: agent `a`: field `max_tool_iterations`: must be between 1 and 1000, found 0",
            "spec.yaml:11:15: agent `a`: field `tools[0].name`: `bad name`: a tool name has only letters, digits, \
             `_` and `-`",
            "spec.yaml:14:26: agent `a`: field `tools[1].parameters.x`: unknown type `text`, expected `string`, \
             `number`, `integer`, `boolean`, `json` or a JSON schema",
            "spec.yaml:14:35: agent `a`: field `tools[1].parameters.y`: expected a type name or a JSON schema, found \
             an integer",
            "spec.yaml:15:16: agent `a`: field `tools[1].value`: invalid expression: syntax error: unexpected end of \
             input, expected expression",
            "spec.yaml:16:15: agent `a`: field `tools[2].name`: two tools are named `twin` (first at line 13, column \
             15)",
            "spec.yaml:18:19: agent `a`: field `tools[2]`: a tool takes either `value` or `template`, not both",
            "spec.yaml:19:9: agent `a`: field `tools[3]`: missing field `value` (an expression over the arguments) or \
             `template`",
            "spec.yaml:20:9: agent `a`: field `tools[3]`: unknown field `descripton` (did you mean `description`?), \
             expected one of `name`, `description`, `parameters`, `value`, `template`, `effect`, `approve`",
            "spec.yaml:21:9: agent `a`: field `tools[4]`: expected a mapping, found a string",
        ]
    );
}

#[tokio::test]
async fn spec_context_is_verbatim_with_conversation_and_summarized_by_the_model_with_summarized() {
    let text = |mode: &str| {
        format!(
            r#"version: 1
root: experts
models:
  default: {{ provider: scripted }}
agents:
  experts: {{ kind: sequence, agents: [medical, legal], output_key: response }}
  medical: {{ kind: llm, user: "As a doctor: {{{{ request }}}}", output_key: medical_answer }}
  legal: {{ kind: llm, user: "As a lawyer: {{{{ question }}}}", context: {{ {mode}: [medical] }}, output_key: response }}
"#
        )
    };
    let run = |spec: String, model: ScriptedModel| async move {
        let built = Spec::parse(&spec, "experts.yaml")
            .expect("valid")
            .build_with_models([("default".to_string(), ChatModelRef::new(model))])
            .expect("build");
        built.root.invoke().input("request", "I broke my leg").input("question", "Should I sue?").await.expect("run")
    };

    let verbatim = ScriptedModel::new(["Rest and ice.", "Yes, you may."]);
    let outcome = run(text("conversation"), verbatim.clone()).await;
    assert_eq!(outcome.output(), Some(&json!("Yes, you may.")));
    assert_eq!(
        verbatim.requests()[1].messages[0].text(),
        "Considering this context:\n[medical] User: As a doctor: I broke my leg\n[medical] Answer: Rest and ice.\n\nAs \
         a lawyer: Should I sue?"
    );

    let summarized = ScriptedModel::new(["Rest and ice.", "A broken leg was treated.", "Yes, you may."]);
    let outcome = run(text("summarized"), summarized.clone()).await;
    assert_eq!(outcome.output(), Some(&json!("Yes, you may.")));
    let requests = summarized.requests();
    assert_eq!(
        requests[1].messages[0].text(),
        format!(
            "{}[medical] User: As a doctor: I broke my leg\n[medical] Answer: Rest and ice.\n",
            agentic::agents::SUMMARY_PROMPT
        )
    );
    assert_eq!(
        requests[2].messages[0].text(),
        "Considering this context: A broken leg was treated.\n\nAs a lawyer: Should I sue?"
    );
}

#[tokio::test]
async fn a_forced_tool_call_applies_to_the_first_request_only_and_sampling_options_reach_the_model() {
    use agentic::agents::model::ToolChoice;
    let text = ORDER_SPEC.replace(
        "    max_tool_iterations: 3\n",
        "    max_tool_iterations: 3\n    tool_choice: order_status\n    temperature: 0\n    max_tokens: 64\n",
    );
    let model = ScriptedModel::new([
        r#"{"tool_calls": [{"name": "order_status", "arguments": {"order_id": "B7"}}]}"#,
        "Order B7 is packed.",
    ]);
    let built = Spec::parse(&text, "support.yaml")
        .expect("valid spec")
        .build_with_models([("default".to_string(), ChatModelRef::new(model.clone()))])
        .expect("build");
    let outcome =
        built.root.invoke().input("question", "And B7?").input("orders", json!({"B7": "packed"})).await.expect("run");
    assert_eq!(outcome.output(), Some(&json!("Order B7 is packed.")));
    let requests = model.requests();
    let options: Vec<(Option<ToolChoice>, Option<f64>, Option<u32>)> =
        requests.iter().map(|r| (r.tool_choice.clone(), r.temperature, r.max_tokens)).collect();
    assert_eq!(
        options,
        [
            (Some(ToolChoice::Tool("order_status".into())), Some(0.0), Some(64)),
            (Some(ToolChoice::Auto), Some(0.0), Some(64)),
        ]
    );
}

#[test]
fn tool_choice_and_sampling_options_are_checked() {
    let text = r#"version: 1
root: a
models:
  default: { provider: scripted }
agents:
  a:
    kind: llm
    user: hi
    tool_choice: order_staus
    temperature: 3
    max_tokens: 0
    tools:
      - { name: order_status, value: "1" }
"#;
    assert_eq!(
        errors(text),
        [
            "spec.yaml:9:18: agent `a`: field `tool_choice`: `order_staus` is neither `auto`, `none`, `required` nor \
             a tool of this agent (did you mean `order_status`?); the tools are `order_status`",
            "spec.yaml:10:18: agent `a`: field `temperature`: must be between 0 and 2, found 3",
            "spec.yaml:11:17: agent `a`: field `max_tokens`: must be at least 1, found 0",
        ]
    );
}

#[tokio::test]
async fn spec_tool_arguments_are_required_and_type_checked_and_the_model_reads_why() {
    let model = ScriptedModel::new([
        r#"{"tool_calls": [{"name": "quote", "arguments": {"unit": 2.5}},
                          {"name": "quote", "arguments": {"quantity": "three", "unit": 2.5}},
                          {"name": "order_status", "arguments": {"order_id": 42}}]}"#,
        "Sorry, I could not look that up.",
    ]);
    let built = Spec::parse(ORDER_SPEC, "support.yaml")
        .expect("valid spec")
        .build_with_models([("default".to_string(), ChatModelRef::new(model.clone()))])
        .expect("build");
    // `quantity` is also a state key: a missing argument must not silently take it.
    let outcome = built
        .root
        .invoke()
        .input("question", "Price?")
        .input("quantity", 3)
        .input("orders", json!({"42": "shipped"}))
        .await
        .expect("run");
    assert_eq!(outcome.output(), Some(&json!("Sorry, I could not look that up.")));
    let results: Vec<String> =
        model.requests()[1].messages.iter().filter(|m| m.role() == "tool").map(|m| m.text().to_string()).collect();
    assert_eq!(
        results,
        [
            "error: the call lacks the required field `quantity`",
            "error: field `quantity` must be of type integer, found \"three\"",
            "error: field `order_id` must be of type string, found 42",
        ]
    );
}

#[tokio::test]
async fn an_empty_summarized_context_summarizes_every_agent() {
    let text = r#"version: 1
root: experts
models:
  default: { provider: scripted }
agents:
  experts: { kind: sequence, agents: [medical, legal], output_key: response }
  medical: { kind: llm, user: "As a doctor: {{ request }}", output_key: medical_answer }
  legal: { kind: llm, user: "As a lawyer: {{ question }}", context: { summarized: [] }, output_key: response }
"#;
    let model = ScriptedModel::new(["Rest and ice.", "A leg was broken.", "Yes, you may."]);
    let built = Spec::parse(text, "experts.yaml")
        .expect("valid")
        .build_with_models([("default".to_string(), ChatModelRef::new(model.clone()))])
        .expect("build");
    let outcome = built.root.invoke().input("request", "I broke my leg").input("question", "Sue?").await.expect("run");
    assert_eq!(outcome.output(), Some(&json!("Yes, you may.")));
    let requests = model.requests();
    assert_eq!(requests.len(), 3, "the summary is asked for");
    assert_eq!(requests[2].messages[0].text(), "Considering this context: A leg was broken.\n\nAs a lawyer: Sue?");
}

#[test]
fn tool_choice_required_needs_tools() {
    let text = "version: 1\nroot: a\nmodels:\n  default: { provider: scripted }\nagents:\n  a: { kind: llm, user: hi, \
                tool_choice: required }\n";
    assert_eq!(
        errors(text),
        ["spec.yaml:6:42: agent `a`: field `tool_choice`: `required` needs at least one tool in `tools`"]
    );
}

#[test]
fn a_tool_parameter_schema_with_an_unknown_type_is_located() {
    let text = "version: 1\nroot: a\nmodels:\n  default: { provider: scripted }\nagents:\n  a:\n    kind: llm\n    user: \
                hi\n    tools:\n      - { name: t, parameters: { n: { type: numbr } }, value: \"n\" }\n";
    assert_eq!(
        errors(text),
        ["spec.yaml:10:37: agent `a`: field `tools[0].parameters.n.type`: \"numbr\" is not a JSON schema type \
             (did you mean `number`?), expected one of `string`, `number`, `integer`, `boolean`, `object`, \
             `array`, `null`"]
    );
}

/// `confidence_key` and `scores_key` need an enum output: anything else is refused where it is written.
#[test]
fn confidence_key_needs_an_enum_output() {
    let text = r#"version: 1
name: s
root: a
models:
  default: { provider: scripted, replies: ["x"] }
agents:
  a:
    kind: llm
    user: hi
    confidence_key: sure
    scores_key: all
"#;
    assert_eq!(
        errors(text),
        [
            "spec.yaml:10:21: agent `a`: field `confidence_key`: needs an enum output (`output: {enum: [..]}`), but \
             the output is text",
            "spec.yaml:11:17: agent `a`: field `scores_key`: needs an enum output (`output: {enum: [..]}`), but the \
             output is text"
        ]
    );
}

/// SPEC.md §4: a wrong `effect` or `approve` of a tool entry (own or `{mcp: ..}`) or of a `kind: mcp` agent is
/// reported where it is written, with the field's path in the agent.
#[test]
fn tool_effects_and_approval_rules_are_checked_with_locations() {
    let text = r#"version: 1
root: s
models:
  default: { provider: scripted }
mcp_servers:
  files: { url: "http://127.0.0.1:1/mcp" }
agents:
  s: { kind: sequence, agents: [desk, fetch] }
  desk:
    kind: llm
    user: hi
    tools:
      - name: refund
        value: "1"
        effect: onse
        approve: 3
      - name: wire
        value: "1"
        effect: [once]
        approve: "args.amount >"
      - mcp: files
        effect: retyr
        approve: [yes]
      - mcp: files
        effetc: once
        approve: "tool in"
      - name: send
        value: "1"
        approve: yes
  fetch:
    kind: mcp
    server: files
    effect: always
"#;
    assert_eq!(
        errors(text),
        [
            "spec.yaml:15:17: agent `desk`: field `tools[0].effect`: unknown effect `onse` (did you mean `once`?), \
             expected `none`, `retry` or `once`",
            "spec.yaml:16:18: agent `desk`: field `tools[0].approve`: expected true, false or an expression over \
             `args`, `tool` and the state, found an integer",
            "spec.yaml:19:17: agent `desk`: field `tools[1].effect`: expected `none`, `retry` or `once`, found a list",
            "spec.yaml:20:18: agent `desk`: field `tools[1].approve`: invalid expression: syntax error: unexpected \
             end of input, expected expression",
            "spec.yaml:22:17: agent `desk`: field `tools[2].effect`: unknown effect `retyr` (did you mean `retry`?), \
             expected `none`, `retry` or `once`",
            "spec.yaml:23:18: agent `desk`: field `tools[2].approve`: expected true, false or an expression over \
             `args`, `tool` and the state, found a list",
            "spec.yaml:25:9: agent `desk`: field `tools[3]`: unknown field `effetc` (did you mean `effect`?), \
             expected one of `mcp`, `filter`, `rename`, `effect`, `approve`",
            "spec.yaml:26:18: agent `desk`: field `tools[3].approve`: invalid expression: syntax error: unexpected \
             end of input, expected expression",
            "spec.yaml:29:18: agent `desk`: field `tools[4].approve`: `yes` is not a boolean (did you mean \
             true/false?)",
            "spec.yaml:33:13: agent `fetch`: field `effect`: unknown effect `always`, expected `none`, `retry` or \
             `once`",
        ]
    );
}

/// SPEC.md §4 defaults: an own tool has effect `none`, an `{mcp: ..}` entry and a `kind: mcp` agent `once`;
/// no call waits for approval unless `approve` says so.
#[test]
fn tool_effects_and_approval_rules_default_as_the_spec_says() {
    use agentic::engine::Effect;
    use agentic::spec::{AgentKind, ApproveDef};
    let text = r#"version: 1
root: s
models:
  default: { provider: scripted }
mcp_servers:
  files: { url: "http://127.0.0.1:1/mcp" }
agents:
  s: { kind: sequence, agents: [desk, fetch, push] }
  desk:
    kind: llm
    user: hi
    tools:
      - { name: plain, value: "1" }
      - { name: refund, value: "1", effect: once, approve: "args.amount > 100" }
      - { mcp: files }
      - { mcp: files, effect: retry, approve: true }
      - { name: quiet, value: "1", effect: retry, approve: false }
  fetch: { kind: mcp, server: files }
  push: { kind: mcp, server: files, effect: none }
"#;
    let spec = Spec::parse(text, "spec.yaml").expect("valid");
    let Some(AgentKind::Llm(llm)) = spec.agent("desk").map(|a| &a.kind) else { panic!("an llm agent") };
    let own: Vec<(&str, Effect, &ApproveDef)> =
        llm.tools.iter().map(|t| (t.name.value.as_str(), t.effect, &t.approve)).collect();
    let [plain, refund, quiet] = &own[..] else { panic!("three own tools: {own:?}") };
    assert_eq!(*plain, ("plain", Effect::None, &ApproveDef::Never));
    assert_eq!((refund.0, refund.1), ("refund", Effect::Once));
    match refund.2 {
        ApproveDef::When(src) => {
            assert_eq!((src.value.as_str(), src.pos.line, src.pos.column), ("args.amount > 100", 14, 60))
        }
        other => panic!("an expression: {other:?}"),
    }
    assert_eq!(*quiet, ("quiet", Effect::Retry, &ApproveDef::Never));
    let mcp: Vec<(Effect, &ApproveDef)> = llm.mcp_tools.iter().map(|t| (t.effect, &t.approve)).collect();
    assert_eq!(mcp, [(Effect::Once, &ApproveDef::Never), (Effect::Retry, &ApproveDef::Always)]);
    for (agent, effect) in [("fetch", Effect::Once), ("push", Effect::None)] {
        let Some(AgentKind::Mcp(m)) = spec.agent(agent).map(|a| &a.kind) else { panic!("an mcp agent") };
        assert_eq!(m.effect, effect, "{agent}");
    }
}

/// SPEC.md §4 through a spec: a tool whose `approve` expression holds for a call suspends the run with a
/// `tool_call` pending response; the other call of the same turn runs; the approval (with who gave it) is
/// journaled and the resumed run gives the model the approved call's result.
#[tokio::test]
async fn a_spec_tool_call_waits_for_approval_when_its_expression_holds() {
    use agentic::engine::{CallEntry, PendingKind, StoreRef, ToolCallStatus, respond_as};
    use agentic::prelude::SledStore;
    let text = r#"version: 1
root: desk
models:
  default:
    provider: scripted
    replies:
      - '{"tool_calls": [{"name": "refund", "arguments": {"amount": 150}}, {"name": "refund", "arguments": {"amount": 50}}]}'
      - "Refunded both."
agents:
  desk:
    kind: llm
    user: "Handle: {{ request }}"
    tools:
      - name: refund
        parameters: { amount: integer }
        template: "refunded {{ amount }}"
        effect: once
        approve: "args.amount > limit and tool == 'refund'"
"#;
    let dir = tempfile::tempdir().expect("tempdir");
    let store: StoreRef = std::sync::Arc::new(SledStore::open(dir.path().join("db")).expect("sled"));
    let built = Spec::parse(text, "spec.yaml").expect("valid").build().expect("build");
    let first = built
        .root
        .invoke()
        .memory_id("spec-approve")
        .input("request", "two refunds")
        .input("limit", 100)
        .store_ref(store.clone())
        .await
        .expect("suspended");
    let pending: Vec<(&str, PendingKind, &Value)> =
        first.pending().iter().map(|p| (p.id.as_str(), p.kind, &p.data["args"])).collect();
    assert_eq!(pending, [("tool:root:0", PendingKind::ToolCall, &json!({"amount": 150}))]);

    respond_as(&store, "spec-approve", Some("tool:root:0"), json!("approve"), Some("cli:ana")).await.expect("ok");
    let done = built.root.resume("spec-approve").store_ref(store.clone()).await.expect("resumed");
    assert_eq!(done.output(), Some(&json!("Refunded both.")));
    let calls: Vec<(u32, ToolCallStatus, Option<String>)> = store
        .records_dyn("spec-approve")
        .await
        .expect("records")
        .into_iter()
        .flat_map(|r| r.calls)
        .filter_map(|c| match c {
            CallEntry::Tool(t) => Some((t.n, t.status, t.by)),
            _ => None,
        })
        .collect();
    assert!(calls.contains(&(0, ToolCallStatus::AwaitingApproval, None)), "{calls:?}");
    assert!(calls.contains(&(0, ToolCallStatus::Approved, Some("cli:ana".to_string()))), "{calls:?}");
    assert!(calls.contains(&(0, ToolCallStatus::Finished, None)), "{calls:?}");
    assert!(calls.contains(&(1, ToolCallStatus::Finished, None)), "the call under the limit ran: {calls:?}");
    assert!(!calls.contains(&(1, ToolCallStatus::AwaitingApproval, None)), "{calls:?}");
}

/// Issue #42: inside a `parallel_mapper`, a spec tool's `value` and its `approve` expression see the item's
/// bound input (`order`) over the state: item A's call runs without approval and gives `A paid`; item B's
/// call waits under the item's own pending id.
#[tokio::test]
async fn a_mapped_llm_agents_tool_and_approval_rule_see_the_item() {
    use agentic::engine::{CallEntry, PendingKind, StoreRef, ToolCallStatus};
    use agentic::prelude::SledStore;
    let text = r#"version: 1
root: each
models:
  default:
    provider: scripted
    replies:
      - '{"tool_calls": [{"name": "pay", "arguments": {}}]}'
      - "Paid A."
      - '{"tool_calls": [{"name": "pay", "arguments": {}}]}'
      - "Paid B."
agents:
  each: { kind: parallel_mapper, agent: clerk, items: orders, item_key: order, max_concurrency: 1 }
  clerk:
    kind: llm
    user: "Pay {{ order }}"
    tools:
      - name: pay
        value: "order ~ ' paid'"
        effect: once
        approve: "order == 'B'"
"#;
    let dir = tempfile::tempdir().expect("tempdir");
    let store: StoreRef = std::sync::Arc::new(SledStore::open(dir.path().join("db")).expect("sled"));
    let built = Spec::parse(text, "spec.yaml").expect("valid").build().expect("build");
    let first = built
        .root
        .invoke()
        .memory_id("mapped-tools")
        .input("orders", json!(["A", "B"]))
        .store_ref(store.clone())
        .await
        .expect("suspended");
    let pending: Vec<(&str, PendingKind)> = first.pending().iter().map(|p| (p.id.as_str(), p.kind)).collect();
    assert_eq!(pending, [("tool:root/0#1:0", PendingKind::ToolCall)]);
    let calls: Vec<(ToolCallStatus, Option<Value>)> = store
        .records_dyn("mapped-tools")
        .await
        .expect("records")
        .into_iter()
        .flat_map(|r| r.calls)
        .filter_map(|c| match c {
            CallEntry::Tool(t) => Some((t.status, t.result)),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [
            (ToolCallStatus::Started, None),
            (ToolCallStatus::Finished, Some(json!("A paid"))),
            (ToolCallStatus::AwaitingApproval, None),
        ]
    );
}

/// Issue #42: an `approve` expression whose value is undefined fails the invocation, naming the tool and the
/// expression, instead of letting the call run.
#[tokio::test]
async fn an_undefined_approval_rule_fails_the_invocation() {
    let text = r#"version: 1
root: desk
models:
  default:
    provider: scripted
    replies:
      - '{"tool_calls": [{"name": "pay", "arguments": {}}]}'
      - "Paid."
agents:
  desk:
    kind: llm
    user: hi
    tools:
      - name: pay
        value: "1"
        effect: once
        approve: needs_review
"#;
    let built = Spec::parse(text, "spec.yaml").expect("valid").build().expect("build");
    let err = built.root.invoke().await.expect_err("failed").to_string();
    assert_eq!(
        err,
        "agent `desk` (root) failed: the approval rule of tool `pay`: `needs_review` is undefined: name a state \
         key, an input, `args.<name>` or `tool`; write `approve: true` to ask every time"
    );
}
