//! Generated text for the long-turn measurements: code-heavy turns of
//! 2-16 KiB, the same on every run (`bench embed-ingest`, and `eval
//! locomo --long-turns`, which buries each LoCoMo turn inside one).

/// Words the generated code is made of.
const WORDS: &[&str] = &[
    "order", "invoice", "customer", "session", "payload", "retry", "window", "cache", "ledger",
    "report", "schedule", "token", "buffer", "account", "record", "stream", "batch", "queue",
];

/// `n` long, code-heavy turns of 2-16 KiB (sizes spread evenly by a
/// fixed sequence, so every run makes the same turns): a line of prose
/// and then Python-like functions, as an agent pasting code writes them.
pub fn code_turns(count: usize) -> Vec<String> {
    use std::fmt::Write as _;
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        // xorshift64: deterministic, no dependency.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let word = |r: u64| WORDS[usize::try_from(r % WORDS.len() as u64).unwrap_or(0)];
    (0..count)
        .map(|turn| {
            let size = 2_048 + usize::try_from(next() % (14 * 1_024)).unwrap_or(0);
            let mut text = format!(
                "Here is the {} handler I wrote for the {} service (turn {turn}):\n",
                word(next()),
                word(next())
            );
            let mut function = 0;
            while text.len() < size {
                let (what, of, arg) = (word(next()), word(next()), word(next()));
                let limit = next() % 1_000;
                let _ = write!(
                    text,
                    "\ndef handle_{what}_{of}_{function}(request, {arg}):\n    \"\"\"Return the {what} of the {of} for a {arg}.\"\"\"\n    value = request.get(\"{arg}_{limit}\", {limit})\n    if value > {limit}:\n        raise ValueError(f\"{what} over {limit}: {{value}}\")\n    for item in {arg}.items():\n        {of}_total = {of}_total + item.{what}\n    return {what}.compute(value, retries={function})\n"
                );
                function += 1;
            }
            // Cut to the size (the text is ASCII, so any byte is a
            // boundary).
            text.truncate(size);
            text
        })
        .collect()
}

/// Buries every `every`-th turn of `samples` (1: each) in generated code:
/// the turn's text sits between the two halves of a 2-16 KiB code turn
/// (the same on every run), as a one-line fact inside a pasted file.
/// Questions and evidence are unchanged.
pub fn bury_in_code(samples: &mut [crate::locomo::Sample], every: usize) {
    let turns: usize = samples
        .iter()
        .flat_map(|s| &s.sessions)
        .map(|x| x.turns.len())
        .sum();
    let mut code = code_turns(turns).into_iter();
    for turn in samples
        .iter_mut()
        .flat_map(|s| &mut s.sessions)
        .flat_map(|x| &mut x.turns)
        .step_by(every.max(1))
    {
        let block = code.next().unwrap_or_default();
        // ASCII: any byte is a boundary.
        let (before, after) = block.split_at(block.len() / 2);
        turn.text = format!("{before}\n{}\n{after}", turn.text);
    }
}
