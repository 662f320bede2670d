//! The A2A decoders: what a remote agent answers (a task or a message, a stream event, an agent card) and what a
//! client sends (a message request), in protocol 1.0 and 0.3, decode or fail without panicking, and what decodes
//! reads back (answer, text, wire form). Input: a selector byte, then JSON.
#![no_main]

use agentic_agents::a2a::{AgentCard, ProtocolVersion, SendMessageRequest, SendMessageResponse, StreamResponse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, json)) = data.split_first() else { return };
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(json) else { return };
    let version = if selector & 1 == 0 { ProtocolVersion::V1_0 } else { ProtocolVersion::V0_3 };
    match (selector >> 1) % 4 {
        0 => match SendMessageResponse::from_wire(value, version) {
            Ok(SendMessageResponse::Task(task)) => {
                let _ = task.answer();
            }
            Ok(SendMessageResponse::Message(message)) => {
                let _ = message.text();
            }
            Err(_) => {}
        },
        1 => {
            let _ = StreamResponse::from_wire(value, version);
        }
        2 => {
            if let Ok(card) = serde_json::from_value::<AgentCard>(value) {
                let _ = card.streams();
            }
        }
        _ => {
            if let Ok(request) = serde_json::from_value::<SendMessageRequest>(value) {
                let _ = request.to_wire(version);
                let _ = request.message.text();
            }
        }
    }
});
