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



#[agents]
trait Resourceful {
    #[agent(user = "Hi {{ x }}", output_key = "y")]
    async fn greet(&self, #[resource] x: String) -> String;
}

#[agent(output_key = "y", inputs(trigger))]
fn unquoted(trigger: bool) -> bool {
    trigger
}

#[agent(update)]
fn updates_nothing(x: i64) {
    let _ = x;
}

#[agent(output_key = "z")]
fn fixer(y: String) -> String {
    y
}

#[agents]
trait Fixing {
    #[agent(user = "Guess {{ x }}", output_key = "y")]
    async fn guess(&self, x: String) -> String;

    #[blackboard(agents(guess, self::fixer), prefer(agent = fixer), output_key = "z")]
    async fn board(&self, x: String) -> String;
}

#[agents]
trait Desires {
    #[agent(user = "Guess {{ x }}", output_key = "y")]
    async fn guess(&self, x: String) -> String;

    #[bdi(desire(name = "guess", priority = 1, satisfied = done, satisfied_key = "y", agents(guess)), output_key = "y")]
    async fn desk(&self, x: String) -> String;
}
fn main() {}
