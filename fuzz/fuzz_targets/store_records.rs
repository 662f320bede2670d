//! The sled store's record decoders and the journal's folding: arbitrary bytes decode to a record or to
//! `StoreError::Corrupt`, and folding decoded steps into a run image never panics. Input: a selector byte,
//! then the value (steps: one value per line, folded in order).
#![no_main]

use agentic_engine::RunImage;
use agentic_store::fuzzing::{decode_chunk, decode_run, decode_snapshot_head, decode_spec, decode_step};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, value)) = data.split_first() else { return };
    match selector % 5 {
        0 => {
            let mut image = RunImage::new("r");
            for (i, line) in value.split(|b| *b == b'\n').enumerate() {
                if let Ok(step) = decode_step("r", i as u64 + 1, line) {
                    let _ = image.apply(&step);
                }
            }
        }
        1 => {
            let _ = decode_run("r", value);
        }
        2 => {
            let _ = decode_snapshot_head("r", value);
        }
        3 => {
            let _ = decode_chunk("r", 1, value);
        }
        _ => {
            let _ = decode_spec("0", value);
        }
    }
});
