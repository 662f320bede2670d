use agentic_macros::agent;

/// Not a value: a file handle cannot be stored in the state.
pub struct Handle(std::fs::File);

/// Opens a file and returns its handle.
#[agent(crate = agentic_engine, output_key = "handle")]
async fn open(path: String) -> Result<Handle, std::io::Error> {
    std::fs::File::open(path).map(Handle)
}

fn main() {}
