//! What model calls spend ([`Usage`]: tokens, calls, cost) and what they cost per token ([`Prices`]).

use serde::{Deserialize, Serialize};

/// What a model call costs per million tokens, in USD (SPEC.md §3 `prices`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    /// USD per million input (prompt) tokens.
    pub input_per_mtok: f64,
    /// USD per million output (completion) tokens.
    pub output_per_mtok: f64,
}

impl Prices {
    /// The cost in USD of `input` and `output` tokens.
    pub fn cost(&self, input: u64, output: u64) -> f64 {
        (input as f64 * self.input_per_mtok + output as f64 * self.output_per_mtok) / 1_000_000.0
    }
}

/// Model usage of one invocation, or a sum of them: tokens, calls and cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Input (prompt) tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output (completion) tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Model calls.
    #[serde(default)]
    pub model_calls: u64,
    /// Cost in USD of the calls to models with prices; `None` when no call was priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The models called (`model` names), each once, in the order first called.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// What each model spent, in the order of `models`, kept only when more than one model was called (with
    /// one, it is the whole usage): read it through [`Usage::per_model`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_model: Vec<ModelUsage>,
}

/// What the calls of one model spent (one row of [`Usage::per_model`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelUsage {
    /// The model's name, as [`Usage::models`] gives it.
    pub model: String,
    /// Input (prompt) tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output (completion) tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Model calls.
    #[serde(default)]
    pub model_calls: u64,
    /// Cost in USD, `None` when no call of the model was priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl ModelUsage {
    fn add(&mut self, other: &ModelUsage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.model_calls += other.model_calls;
        if let Some(c) = other.cost_usd {
            *self.cost_usd.get_or_insert(0.0) += c;
        }
    }
}

impl Usage {
    /// Whether nothing was spent (no tokens, no call, no cost, no model).
    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }

    /// Input plus output tokens.
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// What each model spent, in the order first called: one row per name of [`Usage::models`] (with one
    /// model, the whole usage; a record of an older version that called several models without the split
    /// gives one row naming them all, `a + b`).
    pub fn per_model(&self) -> Vec<ModelUsage> {
        if !self.by_model.is_empty() {
            return self.by_model.clone();
        }
        if self.models.is_empty() {
            return Vec::new();
        }
        vec![ModelUsage {
            model: self.models.join(" + "),
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            model_calls: self.model_calls,
            cost_usd: self.cost_usd,
        }]
    }

    /// Adds `other` to this sum.
    pub fn add(&mut self, other: &Usage) {
        // The split is kept only once two models were called; computed before the totals change.
        let split = match (self.models.as_slice(), other.models.as_slice()) {
            ([], _) | (_, []) => None,
            ([a], [b]) if a == b => None,
            _ => {
                let mut rows = self.per_model();
                for row in other.per_model() {
                    match rows.iter_mut().find(|r| r.model == row.model) {
                        Some(acc) => acc.add(&row),
                        None => rows.push(row),
                    }
                }
                Some(rows)
            }
        };
        if self.models.is_empty() && other.models.len() > 1 {
            self.by_model = other.by_model.clone();
        }
        if let Some(rows) = split {
            self.by_model = rows;
        }
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.model_calls += other.model_calls;
        if let Some(c) = other.cost_usd {
            *self.cost_usd.get_or_insert(0.0) += c;
        }
        for m in &other.models {
            if !self.models.contains(m) {
                self.models.push(m.clone());
            }
        }
    }

    /// Adds one call of `model` that used `input` and `output` tokens and cost `cost_usd`.
    pub fn add_call(&mut self, model: &str, input: u64, output: u64, cost_usd: Option<f64>) {
        self.add(&Usage {
            input_tokens: input,
            output_tokens: output,
            model_calls: 1,
            cost_usd,
            models: vec![model.to_string()],
            by_model: Vec::new(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(model: &str, input: u64, output: u64, calls: u64, cost: Option<f64>) -> ModelUsage {
        ModelUsage {
            model: model.to_string(),
            input_tokens: input,
            output_tokens: output,
            model_calls: calls,
            cost_usd: cost,
        }
    }

    #[test]
    fn one_model_keeps_no_split_and_two_keep_one_row_each_in_the_order_first_called() {
        let mut u = Usage::default();
        u.add_call("small", 10, 5, Some(0.5));
        u.add_call("small", 1, 1, None);
        assert!(u.by_model.is_empty(), "one model: the usage is its row");
        assert_eq!(u.per_model(), [row("small", 11, 6, 2, Some(0.5))]);

        u.add_call("strong", 100, 50, Some(2.0));
        u.add_call("small", 4, 4, Some(0.25));
        assert_eq!(u.per_model(), [row("small", 15, 10, 3, Some(0.75)), row("strong", 100, 50, 1, Some(2.0))]);
        assert_eq!(u.models, ["small", "strong"]);
        assert_eq!((u.input_tokens, u.output_tokens, u.model_calls, u.cost_usd), (115, 60, 4, Some(2.75)));

        // Sums of sums keep the split; the JSON of a one-model usage has none.
        let mut total = Usage::default();
        total.add(&u);
        let mut other = Usage::default();
        other.add_call("strong", 1, 0, None);
        total.add(&other);
        assert_eq!(total.per_model(), [row("small", 15, 10, 3, Some(0.75)), row("strong", 101, 50, 2, Some(2.0))]);
        let mut single = Usage::default();
        single.add_call("small", 1, 2, None);
        let json = serde_json::to_value(&single).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"input_tokens": 1, "output_tokens": 2, "model_calls": 1, "models": ["small"]})
        );
        // A record of several models written without the split reads as one row naming them all.
        let old: Usage = serde_json::from_value(
            serde_json::json!({"input_tokens": 3, "output_tokens": 1, "model_calls": 2, "models": ["a", "b"]}),
        )
        .expect("read");
        assert_eq!(old.per_model(), [row("a + b", 3, 1, 2, None)]);
    }
}
