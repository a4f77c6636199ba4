"""The ten interview questions: prompts and options (the key is in ``key``, outside the package)."""

from collections.abc import Iterable
from dataclasses import dataclass
from string import ascii_uppercase

SEPARATORS = " ,;+/"


def canonical_answer(answer: str | Iterable[str], *, letters: str, multiple: bool) -> str:
    """The answer as sorted unique upper-case letters: ``"dba"``, ``"B, D, A"`` and ``{"A", "B", "D"}`` give ``"ABD"``.

    ``letters`` are the options (e.g. ``"ABCD"``); a single-choice question
    (``multiple=False``) takes exactly one. ValueError names what is wrong.
    """
    if isinstance(answer, str):
        chosen = [c for c in answer.upper() if c not in SEPARATORS]
    elif isinstance(answer, Iterable):
        chosen = [str(item).strip().upper() for item in answer]
    else:
        raise ValueError(f"answer must be a string of letters or a set of letters, got {type(answer).__name__}")
    unknown = sorted({c for c in chosen if len(c) != 1 or c not in letters})
    if unknown:
        raise ValueError(f"answer must use the options {', '.join(letters)}; got {', '.join(map(repr, unknown))}")
    picked = "".join(sorted(set(chosen)))
    if not picked:
        raise ValueError("answer is empty: pick at least one option")
    if not multiple and len(picked) > 1:
        raise ValueError(f"answer must be one letter (single choice), got {picked!r}")
    return picked


@dataclass(frozen=True)
class Question:
    """One question: ``options[i]`` is option ``"ABCD…"[i]``; ``multiple`` allows several letters."""

    id: str
    prompt: str
    options: tuple[str, ...]
    multiple: bool = False

    @property
    def letters(self) -> str:
        """The option letters, e.g. ``"ABCD"``."""
        return ascii_uppercase[: len(self.options)]

    @property
    def kind(self) -> str:
        """"single choice" or "multiple choice", as shown to the student."""
        return "multiple choice" if self.multiple else "single choice"

    def canonical(self, answer: str | Iterable[str]) -> str:
        """``answer`` as sorted upper-case letters (``"dba"`` -> ``"ABD"``); ValueError naming the question."""
        try:
            return canonical_answer(answer, letters=self.letters, multiple=self.multiple)
        except ValueError as error:
            raise ValueError(f"{self.id}: {error}") from None

    def text(self) -> str:
        """The question as plain text: id, kind, prompt and lettered options."""
        how = "one or more letters" if self.multiple else "one letter"
        lines = [f"{self.id} ({self.kind}: {how}). {self.prompt}"]
        lines += [f"  {letter}. {option}" for letter, option in zip(self.letters, self.options, strict=True)]
        return "\n".join(lines)


QUESTIONS: tuple[Question, ...] = (
    Question(
        "Q1",
        "Standard softmax attention over a sequence of N tokens with head dimension d: how does its time grow?",
        ("O(N·d)", "O(N²·d)", "O(N·d²)", "O(N²·d²)"),
    ),
    Question(
        "Q2",
        "Which of these does linear attention use to get below quadratic cost?",
        (
            "Replace the softmax similarity by a dot product of feature maps, φ(q)ᵀφ(k)",
            "Regroup the matrix product using associativity",
            "Take a singular value decomposition of the N×N attention matrix",
            "Summarise the keys and values once, then let every query read that summary",
        ),
        multiple=True,
    ),
    Question(
        "Q3",
        "Going from O(N²d) to O(Nd²) hinges on which change in the order of computation?",
        (
            "Compute QVᵀ first, then multiply by K",
            "Factor Q into two low-rank matrices",
            "Compute VKᵀ first, then multiply by Q",
            "Compute φ(K)ᵀV first, then multiply φ(Q) by it",
        ),
    ),
    Question(
        "Q4",
        "Which device does the Performer (FAVOR+) use to approximate softmax attention?",
        (
            "A low-rank factorisation of the attention matrix",
            "Hashing queries and keys into buckets",
            "Random features whose dot product estimates exp(qᵀk)",
            "Keeping a sparse random subset of the query–key pairs",
        ),
    ),
    Question(
        "Q5",
        "A linear-attention model generates text token by token in its recurrent form. As the sequence grows to "
        "length N, how much does it keep in memory per layer and head?",
        (
            "A cache of O(N²) numbers",
            "A KV cache of O(N·d) numbers",
            "A fixed state of O(d·dv) numbers, whatever N is",
            "A cache of O(N) numbers",
        ),
    ),
    Question(
        "Q6",
        "What can linear attention cost you in accuracy, compared with softmax attention?",
        (
            "The softmax kernel is replaced, or approximated, by another kernel",
            "Order information can get lost in the global summary",
            "The model has fewer parameters",
            "Random features add estimation variance",
        ),
        multiple=True,
    ),
    Question(
        "Q7",
        "How does the number of random features m affect a random-feature estimate of the softmax kernel?",
        (
            "Its variance falls like 1/m",
            "Its variance grows like m²",
            "Its bias grows like m",
            "m does not matter",
        ),
    ),
    Question(
        "Q8",
        "Why can RoPE not be dropped into linear attention unchanged?",
        (
            "RoPE needs an even sequence length",
            "Linear attention only understands absolute positions",
            "Once φ is applied after the rotations, φ(q)ᵀφ(k) no longer depends on the offset j − i alone",
            "RoPE was designed for convolutional networks only",
        ),
    ),
    Question(
        "Q9",
        "In which settings does linear attention tend to pay off?",
        (
            "Reading a 100 000-token document",
            "Real-time streaming speech recognition",
            "Classifying the sentiment of short sentences",
            "Generating a long text token by token",
        ),
        multiple=True,
    ),
    Question(
        "Q10",
        "Which feature map φ did the Linear Transformer (Katharopoulos et al., 2020) use?",
        ("φ(x) = sigmoid(x)", "φ(x) = elu(x) + 1", "φ(x) = tanh(x)", "φ(x) = x², entry by entry"),
    ),
)


def question(question_id: str) -> Question:
    """The question called ``question_id``; ValueError naming the known ids if there is none."""
    for q in QUESTIONS:
        if q.id == question_id:
            return q
    raise ValueError(f"unknown question id {question_id!r}; known: {', '.join(q.id for q in QUESTIONS)}")
