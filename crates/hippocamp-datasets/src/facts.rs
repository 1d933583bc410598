//! Generated personal facts for the consolidation measurements: a scope of
//! distinct facts with a share of reworded copies (`bench dedupe`), and
//! facts stated and later changed (`bench updates`). The same on every
//! run (a fixed xorshift sequence). The rewordings were written before
//! the dedupe thresholds were measured against them: case, punctuation,
//! spelling variants, a filler phrase, or another way to say the same
//! thing.

/// One generated entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    /// Its text.
    pub text: String,
    /// Its group: a copy shares its original's group, so two entries are
    /// duplicates exactly when their groups are equal.
    pub group: usize,
    /// When it was said (ms since the Unix epoch; later for a copy).
    pub at_ms: u64,
}

const NAMES: &[&str] = &[
    "Ana", "Bruno", "Carla", "Diego", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Keiko",
    "Liam", "Maya", "Nadia", "Omar", "Priya", "Quentin", "Rosa", "Samir", "Tara", "Uma", "Victor",
    "Wen", "Ximena", "Yusuf", "Zoe",
];
const CITIES: &[&str] = &[
    "Lisbon", "Porto", "Berlin", "Madrid", "Osaka", "Toronto", "Nairobi", "Lima", "Oslo", "Dublin",
    "Krakow", "Seville", "Denver", "Austin", "Hanoi", "Cairo", "Quito", "Perth", "Tallinn",
    "Bergen",
];
const THINGS: &[&str] = &[
    "green tea",
    "dark chocolate",
    "ramen",
    "tacos",
    "jazz",
    "chess",
    "hiking",
    "sailing",
    "pottery",
    "cycling",
    "sushi",
    "lentil soup",
    "board games",
    "birdwatching",
    "opera",
    "climbing",
];
const JOBS: &[&str] = &[
    "nurse",
    "architect",
    "teacher",
    "plumber",
    "data analyst",
    "chef",
    "pilot",
    "lawyer",
    "carpenter",
    "librarian",
    "dentist",
    "translator",
];
const RELATIONS: &[&str] = &[
    "sister",
    "brother",
    "cousin",
    "manager",
    "neighbour",
    "best friend",
    "landlord",
    "colleague",
    "son",
    "daughter",
    "aunt",
    "uncle",
];
const PETS: &[&str] = &["dog", "cat", "parrot", "rabbit", "tortoise", "hamster"];

/// Deterministic numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n.max(1) as u64).unwrap_or(0)
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

/// A fact's ways of being said: the same content, each form a complete
/// sentence.
#[allow(clippy::many_single_char_names)] // one letter per template slot
fn forms(rng: &mut Rng) -> Vec<String> {
    let (n, c, t, j, r, p, m) = (
        rng.pick(NAMES),
        rng.pick(CITIES),
        rng.pick(THINGS),
        rng.pick(JOBS),
        rng.pick(RELATIONS),
        rng.pick(PETS),
        rng.pick(crate::locomo::MONTHS),
    );
    let day = 1 + rng.below(28);
    match rng.below(10) {
        0 => vec![
            format!("My {r}'s name is {n}"),
            format!("My {r} is called {n}"),
        ],
        1 => vec![
            format!("My {r} {n} lives in {c}"),
            format!("{n}, my {r}, lives in {c}"),
        ],
        2 => vec![
            format!("I really like {t} with my {r} {n}"),
            format!("I love {t} with my {r} {n}"),
        ],
        3 => vec![
            format!("My {r} {n} works as a {j} in {c}"),
            format!("My {r} {n} is a {j} in {c}"),
        ],
        4 => vec![
            format!("Our {p} {n} was born in {m}"),
            format!("Our {p}, {n}, was born in {m}"),
        ],
        5 => vec![
            format!("My {r} {n} has a birthday on {m} {day}"),
            format!("My {r} {n}'s birthday is {m} {day}"),
        ],
        6 => vec![
            format!("I am flying to {c} with {n} on {m} {day}"),
            format!("I'm flying to {c} with {n} on {m} {day}"),
        ],
        7 => vec![
            format!("My {r} {n} is allergic to {t}"),
            format!("My {r} {n} has an allergy to {t}"),
        ],
        8 => vec![
            format!("I met my {r} {n} at a {t} class in {c}"),
            format!("I met {n}, my {r}, at a {t} class in {c}"),
        ],
        _ => vec![
            format!("I have a {j} appointment in {c} on {m} {day}"),
            format!("There is a {j} appointment for me in {c} on {m} {day}"),
        ],
    }
}

const FILLERS: &[&str] = &[
    "Just so you know, ",
    "FYI: ",
    "Remember that ",
    "Note: ",
    "As I said before, ",
];

/// A reworded copy of `text` (or of another of its `forms`): one or two
/// changes a person or an agent makes when saying it again.
fn reword(rng: &mut Rng, forms: &[String]) -> String {
    let mut text = forms[rng.below(forms.len())].clone();
    let changes = 1 + rng.below(2);
    for _ in 0..changes {
        text = match rng.below(6) {
            0 => text.to_lowercase(),
            1 => format!("{text}!"),
            2 => format!("{}{}", rng.pick(FILLERS), lower_first(&text)),
            3 => text
                .replace("My ", "my ")
                .replace(" is ", " is, ")
                .replace("favourite", "favorite"),
            4 => format!("{text}."),
            _ => text.replace("I am", "I'm").replace("I have", "I've got"),
        };
    }
    text
}

fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) if !s.starts_with("I ") && !s.starts_with("I'") => {
            f.to_lowercase().chain(c).collect()
        }
        _ => s.to_owned(),
    }
}

/// `count` entries of which `copies` are reworded copies of earlier ones:
/// distinct facts first (each its own group), then the copies, each of a
/// fact chosen at random and said later.
pub fn with_copies(count: usize, copies: usize) -> Vec<Fact> {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let originals = count.saturating_sub(copies);
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<Fact> = Vec::with_capacity(count);
    let mut all_forms: Vec<Vec<String>> = Vec::with_capacity(originals);
    while out.len() < originals {
        let f = forms(&mut rng);
        if !seen.insert(f[0].to_lowercase()) {
            continue;
        }
        let group = out.len();
        out.push(Fact {
            text: f[0].clone(),
            group,
            at_ms: 1_700_000_000_000 + group as u64 * 1_000,
        });
        all_forms.push(f);
    }
    for i in 0..copies {
        let g = rng.below(originals);
        out.push(Fact {
            text: reword(&mut rng, &all_forms[g]),
            group: g,
            at_ms: 1_700_000_000_000 + (originals + i) as u64 * 1_000,
        });
    }
    out
}

/// A fact stated, then changed: the attribute, its question, the old and
/// the new statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    /// What it is about (`user.home_city`): a fact key.
    pub key: String,
    /// A question whose answer is the current value.
    pub question: String,
    /// What was said first.
    pub old: String,
    /// What was said later.
    pub new: String,
    /// The new value (in `new`, not in `old`).
    pub new_value: String,
}

/// `count` attributes of one user, each stated and later changed.
#[allow(clippy::many_single_char_names)] // one letter per template slot
pub fn updates(count: usize) -> Vec<Update> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::with_capacity(count);
    let mut seen = std::collections::HashSet::new();
    while out.len() < count {
        let r = rng.pick(RELATIONS);
        let (a, b) = distinct(&mut rng, CITIES);
        let (x, y) = distinct(&mut rng, JOBS);
        let (t, u) = distinct(&mut rng, THINGS);
        let (n, m) = distinct(&mut rng, NAMES);
        let item = match rng.below(4) {
            0 => (
                format!("user.{r}.city"),
                format!("Which city does my {r} live in?"),
                format!("My {r} lives in {a}"),
                format!("My {r} lives in {b} now"),
                b,
            ),
            1 => (
                format!("user.{r}.job"),
                format!("What does my {r} work as?"),
                format!("My {r} works as a {x}"),
                format!("My {r} works as a {y} these days"),
                y,
            ),
            2 => (
                format!("user.{r}.hobby"),
                format!("What hobby is my {r} into?"),
                format!("My {r} is into {t} as a hobby"),
                format!("My {r}'s hobby is {u} now, not {t}"),
                u,
            ),
            _ => (
                format!("user.{r}.partner"),
                format!("Who is my {r}'s partner?"),
                format!("My {r}'s partner is {n}"),
                format!("My {r}'s partner is {m} since last spring"),
                m,
            ),
        };
        if !seen.insert(item.0.clone()) {
            continue;
        }
        out.push(Update {
            key: item.0,
            question: item.1,
            old: item.2,
            new: item.3,
            new_value: item.4.to_owned(),
        });
    }
    out
}

fn distinct<'a>(rng: &mut Rng, from: &[&'a str]) -> (&'a str, &'a str) {
    let a = rng.below(from.len());
    let b = (a + 1 + rng.below(from.len() - 1)) % from.len();
    (from[a], from[b])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_share_their_originals_group_and_runs_repeat() {
        let f = with_copies(1_000, 200);
        assert_eq!(f.len(), 1_000);
        let groups: std::collections::HashSet<usize> = f.iter().map(|x| x.group).collect();
        assert_eq!(groups.len(), 800);
        assert!(
            f[800..]
                .iter()
                .all(|c| c.group < 800 && c.at_ms > f[c.group].at_ms)
        );
        assert_eq!(f, with_copies(1_000, 200));
    }

    #[test]
    fn updates_change_one_value_per_key() {
        let u = updates(48);
        assert_eq!(u.len(), 48);
        for x in &u {
            assert!(
                x.new.contains(&x.new_value) && !x.old.contains(&x.new_value),
                "{x:?}"
            );
        }
    }
}
