use agentic_macros::{agent, agents};

#[agent(reply_only, output_key = "total")]
async fn add(amount: i64) -> i64 {
    amount
}

#[agents]
trait Review {
    #[human(output_key = "verdict")]
    async fn review(&self) -> String;
}

#[agents]
trait Board {
    #[agent(user = "Check {{ x }}", output_key = "y")]
    async fn check(&self, x: String) -> String;

    #[blackboard(agents(check), prefer(agent = other, when = always), output_key = "y")]
    async fn board(&self, x: String) -> String;
}

fn main() {}
