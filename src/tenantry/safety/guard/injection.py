"""Instruction-like text (prompt injection) in data that will reach an agent.

The detector is a set of weighted regular expressions over a normalised copy
of the text (NFKC, zero-width characters removed, whitespace folded). A rule
with weight 1.0 flags on its own (``ignore previous instructions``, chat
template tokens, ``do not tell the user``); weaker cues (an e-mail address
after ``send``, ``IMPORTANT!!!``) flag only when they add up to 1.0 inside one
paragraph. Base64, hex, binary, ``\\u`` escapes, Ascii85, ROT13, reversed
lines and spaced-out letters (``I g n o r e``) are decoded and scanned too.
It is a heuristic: its detection and false-positive rates are measured in
``bench/guard.py`` and reported in ``bench/guard.md``.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import codecs
import re
import unicodedata
from dataclasses import dataclass

_ZERO_WIDTH: dict[int, int | None] = dict.fromkeys(
    map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e"), None
)
# Unicode tag characters (U+E0020..U+E007E) mirror ASCII and render invisibly:
# "ASCII smuggling". Normalising maps them back to the ASCII they hide.
_ZERO_WIDTH.update({0xE0000 + c: c for c in range(0x20, 0x7F)})
_TAGS = re.compile("[\U000e0020-\U000e007e]{8,}")

_MODEL = (
    r"(?:ai|a\.i\.|assistant|agent|llm|language model|chat ?bot|model|claude|chatgpt|gpt(?:-?\d[\w"
    r".-]*)?"
    r"|copilot|gemini|codex|bard|llama|mistral|bot)"
)
_INSTR = (
    r"(?:instructions?|prompts?|directions?|rules|guidelines|directives?|commands?|context|"
    r"orders?|programming|constraints|guardrails|policies|task)"
)

# (name, weight, pattern) -- patterns run on the normalised, lower-cased text.
RULES: tuple[tuple[str, float, re.Pattern[str]], ...] = tuple(
    (n, w, re.compile(p))
    for n, w, p in (
        (
            "ignore_previous",
            1.0,
            r"\b(?:ignore|disregard|forget|skip|override|bypass|neglect|drop|abandon|discard)\b"
            r"[^.\n]{0,40}?\b(?:previous|prior|above|earlier|preceding|initial|original|all|any|"
            r"every|your|system|following|those|these|other)\b[^.\n]{0,30}?\b" + _INSTR + r"\b"
            r"|\b(?:ignore|disregard|forget)\s+(?:all\s+)?(?:of\s+)?(?:your|the)\s+(?:previous|pri"
            r"or|"
            r"earlier|original|above)\b|\b(?:ignore|disregard)\s+(?:the\s+)?(?:instructions|direct"
            r"ions)\b",
        ),
        (
            "ignore_data",
            0.5,
            r"\b(?:ignore|disregard)\s+(?:the rest of |all of |everything (?:else )?(?:in )?)?"
            r"(?:this|these|that|other|them|the rest|everything else)\b",
        ),
        (
            "new_instructions",
            0.5,
            r"\b(?:new|updated|real|actual|true|hidden|secret|override|revised|important|core)\s+"
            r"(?:system\s+)?" + _INSTR + r"\s*(?:[:!]|are\b|follow)"
            r"|\bfollow (?:this|these|the following|my|new) instructions?\b",
        ),
        (
            "role_override",
            1.0,
            r"\byou are (?:now|no longer|actually)\b|\bfrom now on,? (?:you|your|act|respond)\b"
            r"|\bpretend (?:to be|you are|that you)\b|\b(?:act|behave|respond|roleplay) as (?:if y"
            r"ou|an? "
            r"(?:unrestricted|unfiltered|jailbroken|evil|uncensored))|\byou (?:will|must) now\b"
            r"|\b(?:you are going to|you will) act as\b",
        ),
        (
            "address_model",
            1.0,
            r"\b(?:to you|dear|hey|hello|attention|note to|message for|message to|instructions for"
            r"),?\s+"
            r"(?:the\s+|dear\s+|an?\s+)?(?:automated\s+|ai\s+)?" + _MODEL + r"\b(?![\w-])"
            r"|\bnote to (?:the )?automated\b|\b(?:visible|invisible) to (?:the )?(?:llms?|ai|mode"
            r"ls?)\b"
            r"|\bif (?:the )?user asks\b",
        ),
        (
            "address_model_weak",
            0.5,
            r"(?:^|[.!?]\s|\n)\s*(?:an?\s+|the\s+|dear\s+)?"
            + _MODEL
            + r"[,:]\s+(?:you|please|ignore|do|"
            r"make|send|run|execute|delete|remember)\b"
            r"|\byour (?:monologue|system prompt|context window|training data)\b"
            r"|\bautomated (?:screening|analysis|review) (?:systems?|software)\b"
            r"|\bif (?:you are |you're )?(?:questioned|asked about)\b",
        ),
        (
            "template_token",
            1.0,
            r"<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id)\|>"
            r"|\[/?inst\]|<<sys>>|<start_of_turn>|<end_of_turn>|</?(?:system|sys)>"
            r"|(?m:^\s*#{2,}\s*\(?(?:system|instruction|new instructions?|system[_ ]message)\b)"
            r"|\[(?:system|assistant)\](?!\s*$)|<end of session>",
        ),
        (
            "pseudo_tag",
            1.0,
            r"</?(?:information|important|instructions?|admin|system[_ -]?(?:message|prompt|note)|"
            r"hidden|secret[_ ]?instructions?)>|\[admin request\b",
        ),
        (
            "conceal",
            1.0,
            r"\b(?:do not|don'?t|never|without)\s+(?:tell|telling|inform|informing|mention|mention"
            r"ing|"
            r"reveal|revealing|notify|notifying|alert|alerting|show|showing|asking|ask|letting)\b"
            r"[^.\n]{0,15}\b(?:the )?(?:user|human|operator|admin|administrator|owner)\b",
        ),
        (
            "prompt_leak",
            1.0,
            r"\b(?:print|repeat|reveal|output|show|display|leak|tell me|spell|write out|recite)\b"
            r"[^.\n]{0,40}\b(?:system prompt|initial prompt|instructions above|(?:previous|prior|"
            r"original|hidden|secret|your) (?:instructions|prompt))\b",
        ),
        (
            "conversation_ref",
            1.0,
            r"\b(?:summary of|contents? of|append|replace [^.\n]{0,20} with|including)\b[^.\n]{0,4"
            r"0}"
            r"\b(?:this|our|the previous|the current) (?:conversation|chat|message|dialogue)\b",
        ),
        (
            "jailbreak",
            1.0,
            r"\bdo anything now\b|\bjailbr(?:eak|oken)\b|\bdeveloper mode (?:enabled|output)\b"
            r"|\b(?:no|without) (?:ethical|moral) (?:or moral )?(?:guidelines|restrictions|filters"
            r")\b"
            r"|\bstay in character\b|\[dan\]|\bdan mode\b",
        ),
        (
            "task_hijack",
            1.0,
            r"\bbefore (?:you )?(?:can )?(?:solve|complete|continue|do|finish|answer|respond)"
            r"[^.\n]{0,40}\b(?:task|request|question)\b[^.\n]{0,40}\b(?:please|you must|first)\b"
            r"|\binstead,? (?:you (?:should|must)|do the following)\b"
            r"|\bstop what you(?:'re| are) doing\b|\b(?:your|the) (?:real|actual|new) task is\b",
        ),
        (
            "urgent",
            0.5,
            r"\bimportant\s*!{2,}|\burgent\s*!{2,}|\battention\s*!{2,}|\bimportant message\b|!{3,}"
            r"|\bsystem message\b",
        ),
        (
            "exfil",
            0.5,
            r"\b(?:send|email|e-mail|forward|post|upload|transfer|exfiltrate|leak|share)\b[^\n]{0,"
            r"80}?"
            r"(?:[\w.+-]+@[\w-]+\.[\w.]+|https?://)",
        ),
        (
            "sensitive_object",
            0.5,
            r"\b(?:passwords?|credentials|api keys?|access tokens?|security code|private key|ssh k"
            r"ey|"
            r"\.ssh/id_\w+|secret key|session cookie|2fa code)\b",
        ),
        (
            "tool_coercion",
            0.5,
            r"\b(?:call|invoke|use|run|execute) (?:the )?(?:following |this )?"
            r"(?:tool|function|command|code)\b[^.\n]{0,30}(?:immediately|now|first|right away)\b",
        ),
        (
            "pipe_to_shell",
            0.5,
            r"\b(?:curl|wget)\b[^\n|]{1,200}\|\s*(?:sudo\s+)?(?:ba|z)?sh\b",
        ),
        (
            "markdown_exfil",
            1.0,
            r"!\[[^\]]{0,80}\]\(https?://[^)\s]{1,200}(?:[?&=][\w-]*=?(?:\{|\[|%7b|\$|<)|\[[a-z_]+"
            r"\])"
            r"|\]\(\s*javascript:",
        ),
        (
            "render_evasion",
            0.5,
            r"\b(?:no|not use a|without(?: a)?|not in a) code[ -]?(?:style )?block"
            r"|\bconcatenate (?:these|the following) strings\b|\bin your (?:output|response|reply|"
            r"answer)\b",
        ),
        (
            "script_payload",
            0.5,
            r"<script\b|\bjavascript:",
        ),
        (
            "decode_and_follow",
            0.5,
            r"\b(?:decode|decipher|translate|unscramble)\b[^.\n]{0,40}\b(?:follow|execute|obey|do)"
            r"\b",
        ),
        (
            "fake_notice",
            1.0,
            r"[\[(<{]\s*(?:system|operator|admin(?:istrator)?|security|sysadmin|root|developer|"
            r"platform|tenantry|slurm)\s+(?:notice|note|override|alert|message|update|instruction|"
            r"directive|announcement|hinweis)s?\s*[\])>}]"
            r"|\b(?:operator|admin|developer|system|sysadmin)[ -]override\b"
            r"|\bend of (?:the )?(?:user )?(?:input|prompt|document|data)\b[^\n]{0,8}\n[^\n]{0,5}"
            r"(?:system|assistant|admin)\b|\bnota (?:del|di) sistema\b|\bsystemhinweis\b",
        ),
        (
            "fake_notice_weak",
            0.5,
            r"(?m:^[\s#*=>|-]*(?:system|operator|admin(?:istrator)?|security|sysadmin|developer|"
            r"platform)\s+(?:notice|note|alert|message|update|instruction|directive)s?\s*[:!-])",
        ),
        (
            "supersede",
            1.0,
            r"\bsupersedes? (?:all |any |every )?(?:prior|previous|earlier|other|existing)\b"
            r"|\bsafety (?:protocols?|filters?|guidelines|guardrails|checks) (?:are )?(?:now )?"
            r"(?:disabled|off|lifted|suspended)\b"
            r"|\b(?:instructions|prompt|rules) (?:you were|you've been|you have been) given\b",
        ),
        (
            "chat_tag",
            0.5,
            r"<(?:assistant|human|thinking|reasoning|tool_result|function_results)>",
        ),
        (
            "chat_tag_close",
            1.0,
            r"</(?:user|assistant|human|thinking|reasoning|tool_result|function_results)>"
            r"|\breasoning(?: trace)? \((?:assistant|ai|model)\)|\bas (?:the|an|your) (?:ai )?"
            r"assistant, i\b",
        ),
        (
            "comment_to_model",
            0.5,
            r"<!--[^>]{0,400}?\b(?:ai|assistant|agent|llm|model|you must|you should|ignore|"
            r"instructions?|do not tell)\b"
            r"|(?m:^\s*(?:#|//|/\*|\*|--|;)\s*(?:note|attention|important|todo)?[:!]?\s*(?:to|for)"
            r" (?:the )?(?:ai|assistant|agent|llm|model|copilot|claude|codex|gemini)\b)",
        ),
        (
            "comment_addressed",
            1.0,
            r"<!--\s*(?:note (?:to|for) )?(?:the )?(?:ai|assistant|agent|llm|model|claude|codex|"
            r"copilot|gemini)\b\s*[:,]",
        ),
        (
            "persist_memory",
            1.0,
            r"\b(?:save|store|write|add|keep) (?:this|the following|it|these)[^.\n]{0,40}\b"
            r"(?:your )?(?:long[- ]term )?memory\b|\bremember for (?:all )?(?:future|later)\b",
        ),
        (
            "every_future",
            0.5,
            r"\b(?:in|to|at the end of) (?:every|all|any) (?:future |subsequent )?(?:replies|reply|"
            r"responses?|summar(?:y|ies)|reports?|answers?|outputs?|messages?)\b"
            r"|\bin your (?:summary|report)\b",
        ),
        (
            "when_you_read",
            0.5,
            r"\b(?:when|once|after|as soon as|while) you (?:read|process|see|parse|summari[sz]e|"
            r"open|load|review|handle) (?:this|these|the (?:file|ticket|document|page|output))\b"
            r"|\b(?:after|when|once) (?:reading|processing|parsing|opening) (?:this|these)\b"
            r"|\bbefore (?:you )?(?:reply|respond|answer|continue|proceed|finish|summari[sz]e)"
            r"(?:ing)?\b|\b(?:also|then|quietly|silently|secretly) (?:email|send|forward|upload|"
            r"delete|remove|post|run|execute|copy)\b",
        ),
        (
            "tool_call",
            0.5,
            r"\b(?:call|invoke|use|run|trigger) (?:the )?`?[a-z]+_[a-z_]+`?(?:\(\))? "
            r"(?:tool |function )?(?:on|to|with|for|and)\b",
        ),
        (
            "comply_unrestricted",
            0.5,
            r"\bcomply (?:fully |with (?:every|all|any) (?:request|instruction|command)s?)"
            r"|\b(?:without|no) (?:questions?|restrictions|limits|limitations|filters)\b"
            r"|\bunrestricted (?:response|mode|assistant|answer|output)\b",
        ),
        (
            "encoding_name",
            0.5,
            r"\b(?:rot-?13|base-?64|base-?32|hex(?:adecimal)?|binary|morse|reversed?|backwards)\b",
        ),
        (
            "foreign_override",
            1.0,
            r"\b(?:ignorez|oubliez|ignora|ignore|olvida|ignoriere|vergiss|ignorar|esque[cç]a)\s+"
            r"(?:toutes |todas |tutte |alle |all )?(?:les |las |le |as |os |die |deine |tus |vos )?"
            r"(?:instructions|instrucciones|istruzioni|instru[cç][oõ]es|anweisungen|vorgaben)\b"
            r"|\b(?:du bist jetzt|vous [eê]tes d[eé]sormais|ahora eres|ora sei|"
            r"agora voc[eê] [eé])\b"
            r"|\b(?:prompt (?:du |del |de |di )?(?:syst[eè]me|sistema)|systemanweisungen|"
            r"instrucciones del sistema|istruzioni di sistema|instructions syst[eè]me)\b",
        ),
        (
            "answer_override",
            0.5,
            r"\b(?:just|only) (?:print|say|output|respond with|reply with|answer)\b"
            r"|\b(?:reply|respond|answer) with only\b",
        ),
    )
)

# Cues that depend on letter case, run on the normalised text before lower-casing.
CASED_RULES: tuple[tuple[str, float, re.Pattern[str]], ...] = tuple(
    (n, w, re.compile(p, re.MULTILINE))
    for n, w, p in (
        (
            "role_label",
            0.5,
            r"^\s*(?:System|SYSTEM|Assistant|ASSISTANT|User|USER|Human|HUMAN)\s*:\s+\S",
        ),
        ("role_label_strong", 1.0, r"\bSYSTEM(?: MESSAGE| NOTE| PROMPT)?\s*:\s+\S"),
    )
)

# A rule runs only when one of its literal needles occurs in the (lower-cased)
# text: a C-speed prefilter that skips most rules on ordinary output.
NEEDLES: dict[str, tuple[str, ...]] = {
    "ignore_previous": ("ignore", "disregard", "forget", "skip", "override", "bypass", "neglect",
                        "drop", "abandon", "discard"),
    "ignore_data": ("ignore", "disregard"),
    "role_override": ("you are", "from now on", "pretend", " as ", "you will", "you must"),
    "address_model": ("to you", "dear", "hey", "hello", "attention", "note to", "message ",
                      "instructions for", "visible to", "user asks"),
    "template_token": ("<|", "[inst]", "[/inst]", "<<sys>>", "_of_turn>", "<system>", "</system>",
                       "<sys>", "</sys>", "##", "[system]", "[assistant]", "<end of session>"),
    "pseudo_tag": ("<", "[admin request"),
    "prompt_leak": ("prompt", "instructions"),
    "conversation_ref": ("conversation", "chat", "message", "dialogue"),
    "jailbreak": ("do anything now", "jailbr", "developer mode", "ethical", "moral",
                  "stay in character", "[dan]", "dan mode"),
    "task_hijack": ("before", "instead", "stop what you", "task is"),
    "urgent": ("!!", "important message", "system message"),
    "exfil": ("@", "http"),
    "tool_coercion": ("immediately", "now", "first", "right away"),
    "pipe_to_shell": ("curl", "wget"),
    "markdown_exfil": ("](",),
    "render_evasion": ("code", "concatenate", "in your "),
    "script_payload": ("<script", "javascript:"),
    "decode_and_follow": ("decode", "decipher", "translate", "unscramble"),
    "answer_override": ("just ", "only "),
    "fake_notice": ("notice", "note", "override", "alert", "message", "update", "instruction",
                    "directive", "announcement", "hinweis", "end of", "nota d"),
    "fake_notice_weak": ("notice", "note", "alert", "message", "update", "instruction",
                         "directive"),
    "supersede": ("supersede", "safety", "given"),
    "chat_tag": ("<assistant", "<human", "<thinking", "<reasoning", "<tool_result", "<function_r"),
    "chat_tag_close": ("</", "reasoning", "assistant, i"),
    "comment_to_model": ("<!--", " ai", "assistant", "agent", "llm", "model", "copilot", "claude",
                         "codex", "gemini"),
    "comment_addressed": ("<!--",),
    "persist_memory": ("memory", "remember for"),
    "every_future": ("every ", " future", "subsequent", "in your", "all repl", "all respon",
                     "all summar", "all report", "all answer", "all output", "all messag"),
    "when_you_read": ("when you", "once you", "after you", "soon as you", "while you", "reading th",
                      "processing th", "parsing th", "opening th", "before", "also ", "then ",
                      "quietly", "silently", "secretly"),
    "tool_call": ("call ", "invoke ", "use ", "run ", "trigger "),
    "comply_unrestricted": ("comply", "question", "restriction", "limit", "filter",
                            "unrestricted"),
    "encoding_name": ("rot13", "rot-13", "base64", "base-64", "base32", "base-32", "hex",
                      "binary", "morse", "revers", "backwards"),
    "foreign_override": ("ignor", "oubli", "olvida", "vergiss", "esque", "du bist", "tes d",
                         "ahora eres", "ora sei", "agora", "sistema", "syst"),
    "role_label": ("System", "SYSTEM", "Assistant", "ASSISTANT", "User", "USER", "Human", "HUMAN"),
    "role_label_strong": ("SYSTEM",),
}  # fmt: skip

_MIXED_SCRIPT = re.compile(r"[a-z][\u0370-\u03ff\u0400-\u04ff]|[\u0370-\u03ff\u0400-\u04ff][a-z]")

FLAG_AT = 1.0


@dataclass(frozen=True, slots=True)
class InjectionHit:
    rule: str
    line: int  # 1-based line of the original text where the cue starts
    score: float
    excerpt: str


def normalise(text: str) -> str:
    """NFKC and drop zero-width characters (rules then read it lower-cased)."""
    return unicodedata.normalize("NFKC", text).translate(_ZERO_WIDTH)


def _paragraph_index(text: str) -> tuple[list[int], list[int]]:
    """Start offsets and first line numbers of paragraphs (blank-line separated, <= 12 lines)."""
    offsets: list[int] = []
    lines: list[int] = []
    pos, run, inside = 0, 0, False
    for i, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            inside = False
        else:
            if not inside or run >= 12:
                offsets.append(pos)
                lines.append(i)
                inside, run = True, 0
            run += 1
        pos += len(line) + 1
    return offsets or [0], lines or [1]


_REVERSED_CUES = ("erongi", "dragersid", "snoitcurtsni", "tpmorp", "metsys", "uoy era")
_SPACED = re.compile(r"(?<![\w])(?:[A-Za-z][ .\-_*]){3,}[A-Za-z](?![\w])")
_BINARY = re.compile(r"\b0[01]{7}(?:[ ,]?[01]{8}){5,}\b")
_UESC = re.compile(r"(?:\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}){6,}")
_A85 = re.compile(r"<~[!-u\s]{10,}~>")
_B64 = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{24,}={0,2}(?![A-Za-z0-9+/=])")
_HEX = re.compile(r"\b(?:[0-9a-fA-F]{2}[ :]?){16,}\b")


def _decoded_views(text: str) -> list[str]:
    """Printable text hidden in base64/hex runs, and the ROT13 of the whole text."""
    views: list[str] = []
    for m in _B64.finditer(text):
        run = m.group(0)
        try:
            raw = base64.b64decode(run + "=" * (-len(run) % 4), validate=False)
        except (binascii.Error, ValueError):
            continue
        views.append(raw.decode("utf-8", "replace"))
    for m in _HEX.finditer(text):
        try:
            raw = bytes.fromhex(re.sub(r"[ :]", "", m.group(0)))
        except ValueError:
            continue
        views.append(raw.decode("utf-8", "replace"))
    for m in _BINARY.finditer(text):
        bits = re.findall(r"[01]{8}", m.group(0))
        views.append(bytes(int(b, 2) for b in bits).decode("utf-8", "replace"))
    for m in _UESC.finditer(text) if "\\" in text else ():
        codes = re.findall(r"\\(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2}))", m.group(0))
        views.append("".join(chr(int(u or x, 16)) for u, x in codes))
    for m in _A85.finditer(text):
        try:
            views.append(base64.a85decode(m.group(0), adobe=True).decode("utf-8", "replace"))
        except ValueError:
            continue
    return [
        v for v in views if v and sum(c.isprintable() or c.isspace() for c in v) > 0.95 * len(v)
    ]


def _despaced(text: str) -> str:
    """``I g n o r e`` and ``i.g.n.o.r.e`` folded back into words (spaced-letter evasion)."""
    return _SPACED.sub(lambda m: re.sub(r"[ .\-_*]", "", m.group(0)), text)


def _scan(cased: str, strong_only: bool = False) -> list[InjectionHit]:
    """Run every rule once over the whole text; add up weights per paragraph."""
    lower = cased.lower()
    index_l = _paragraph_index(lower)
    index_c = index_l if len(lower) == len(cased) else _paragraph_index(cased)
    found: dict[int, dict[str, tuple[float, int, str]]] = {}

    def add(k: int, name: str, weight: float, line: int, excerpt: str) -> None:
        found.setdefault(k, {}).setdefault(name, (weight, line, excerpt))

    for rules, text, (offsets, lines) in ((RULES, lower, index_l), (CASED_RULES, cased, index_c)):
        for name, weight, pat in rules:
            if strong_only and weight < FLAG_AT:
                continue
            needles = NEEDLES.get(name)
            if needles and not any(n in text for n in needles):
                continue
            for m in pat.finditer(text):
                k = max(bisect.bisect_right(offsets, m.start()) - 1, 0)
                if name not in found.get(k, {}):
                    line = lines[k] + text.count("\n", offsets[k], m.start())
                    add(k, name, weight, line, m.group(0)[:80])
    if not strong_only:
        mixed: dict[int, int] = {}
        for m in _MIXED_SCRIPT.finditer(lower):
            k = max(bisect.bisect_right(index_l[0], m.start()) - 1, 0)
            mixed[k] = mixed.get(k, 0) + 1
        for k, n in mixed.items():
            if n >= 3:
                add(
                    k,
                    "mixed_script",
                    1.0,
                    index_l[1][k],
                    "(Latin mixed with Greek/Cyrillic letters)",
                )
    hits: list[InjectionHit] = []
    for k in sorted(found):
        cues = found[k]
        score = sum(w for w, _, _ in cues.values())
        if score >= FLAG_AT:
            hits.extend(InjectionHit(n, line, score, ex) for n, (_w, line, ex) in cues.items())
    return hits


def find_injections(text: str) -> list[InjectionHit]:
    """Cues of instruction-like text, grouped by paragraph; empty when none flags."""
    norm = normalise(text)
    hits = _scan(norm)
    tags = _TAGS.search(text)
    if tags:
        line = text.count("\n", 0, tags.start()) + 1
        hits.append(InjectionHit("hidden_unicode_tags", line, 1.0, "(invisible tag characters)"))
    if hits:
        return hits
    for view in _decoded_views(text):
        for h in _scan(normalise(view)):
            hits.append(InjectionHit("encoded:" + h.rule, 0, h.score, h.excerpt))
    if not hits and _SPACED.search(norm):
        for h in _scan(_despaced(norm), strong_only=True):
            hits.append(InjectionHit("spaced:" + h.rule, h.line, h.score, h.excerpt))
    if not hits and len(norm) <= 65_536:
        for h in _scan(codecs.decode(norm, "rot13"), strong_only=True):
            hits.append(InjectionHit("rot13:" + h.rule, h.line, h.score, h.excerpt))
        # reversed text, line by line (a line read right to left), when a reversed cue shows
        low = norm.lower()
        if any(cue in low for cue in _REVERSED_CUES):
            back = "\n".join(line[::-1] for line in norm.split("\n"))
            for h in _scan(back, strong_only=True):
                hits.append(InjectionHit("reversed:" + h.rule, h.line, h.score, h.excerpt))
    return hits
