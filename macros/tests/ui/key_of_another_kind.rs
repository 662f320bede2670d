use agentic_macros::agents;

#[agents(crate = agentic_engine)]
pub trait Panel {
    #[agent(user = "Argue for {{ topic }}.", output_key = "pro")]
    async fn pro(&self, topic: String) -> String;

    #[agent(user = "Argue against {{ topic }}.", output_key = "con")]
    async fn con(&self, topic: String) -> String;

    #[agent(user = "Decide on {{ topic }}.", output_key = "verdict")]
    async fn judge(&self, topic: String) -> String;

    // `agents(..)` is a sequence's (and most composites') key; a debate names `debaters(..)`.
    #[debate(agents(pro, con), judge = judge, output_key = "verdict")]
    async fn debate(&self, topic: String) -> String;
}

fn main() {}
