"""Question sets for scripts/bench_rag.py (data only).

English: questions written from the text of CPython's `pydoc_data.topics` (not from search results),
each with a phrase of the answer passage; the answer documents are the topics whose text holds it.
Dutch: questions written from the three articles in ../shared/corpus-nl (paraphrased, not copied),
each with the exact phrase of the answer passage and a short fact the answer must state.
Declines: questions the documents do not answer.
Held out (NL_HELDOUT, EN_HELDOUT, ABSENT_HELDOUT): written before the answer side was tuned, from other facts
of the same texts, and never used to choose a setting; report them apart from the dev sets above.
"""
from __future__ import annotations

# (question, a phrase of the answer passage, whitespace-normalised)
EN_QUESTIONS = [
    ("What happens to assert statements when Python optimizes the code?", "when optimization is requested at compile time"),
    ("What does the pass statement do?", "null operation"),
    ("What does deleting a name do?", "Deletion of a name removes the binding of that name"),
    ("Where is the break statement allowed?", 'may only occur syntactically nested in a "for" or "while" loop'),
    ("When does the else clause of a loop run?", "clause, if present, is executed and the loop terminates"),
    ("What happens when a generator function returns?", 'will cause "StopIteration" to be raised'),
    ("Which variables can a nonlocal statement refer to?", "previously bound variables in the nearest enclosing scope"),
    ("Can a lambda contain statements or type annotations?", "cannot contain statements or annotations"),
    ("Where must an except clause without an expression be placed?", 'expression-less "except" clause, if present, must be last'),
    ("Which values count as false in a boolean test?", 'False", "None", numeric zero of all types'),
    ("Which operator is used for matrix multiplication?", 'The "@" (at) operator'),
    ("What is the result of raising an integer to a negative power?", "all arguments are converted to float and a float result is delivered"),
    ("What is a left shift by n bits equivalent to?", 'multiplication with "pow(2,n)"'),
    ("How is casefold different from lower?", "Casefolding is similar to lowercasing but more aggressive"),
    ("What does partition return when the separator is missing?", "return a 3-tuple containing the string itself, followed by two empty strings"),
    ("How do I pad a numeric string with zeros on the left?", "left filled with ASCII \"'0'\" digits"),
    ("Do dictionaries keep the order in which keys were inserted?", "Dictionaries preserve insertion order"),
    ("Is list sorting stable?", "guaranteed to be stable"),
    ("Which special method implements len()?", 'Called to implement the built-in function "len()"'),
    ("How must __hash__ relate to equality?", "Objects that are equal should either have the same hash value"),
    ("What is raise ... from used for?", 'The "from" clause is used for exception chaining'),
    ("Is __exit__ always called by a with statement?", '"__exit__()" will always be called'),
    ("What does continue do inside a loop?", "skips the rest of the suite and goes back"),
    ("What does a function return when it has no return statement?", "returned by functions that don’t explicitly return a value"),
    ("Can a name be used before its global declaration in the same block?", "textually preceding"),
    ("Do underscores change the value of a numeric literal?", "Underscores are ignored for determining the numeric value"),
    ("Can comparison operators be chained like a < b < c?", "Comparisons can be chained arbitrarily"),
    ("When is x is y true?", "are the same object"),
    ("What does the import statement do first?", "find a module, loading and initializing it if necessary"),
    ("What is a raw string literal?", "raw strings"),
    ("Can await be used outside a coroutine function?", "Can only be used inside a *coroutine function*"),
    ("Is it allowed to use yield from inside an async def function?", 'It is a "SyntaxError" to use a "yield from" expression inside the body of a coroutine function'),
    ("How are private names in a class transformed?", "Private names are transformed to a longer form"),
    ("When is __getattr__ called?", 'Called when the default attribute access fails with an "AttributeError"'),
    ("Can the target of an augmented assignment be an unpacking?", "cannot be an unpacking"),
    ("How many Ellipsis objects exist?", "There is exactly one ellipsis object"),
    ("How does a code object differ from a function object?", "they don’t contain a reference to their global execution environment"),
    ("What does a class inherit from when no base class is given?", 'inherit, by default, from the base class "object"'),
    ("Can the Python debugger do post-mortem debugging?", "It also supports post-mortem debugging"),
    ("Are free variables resolved at compile time?", "Name resolution of free variables occurs at runtime, not at compile time"),
    ("What is a code block in a Python program?", "A *block* is a piece of Python program text that is executed as a unit"),
    ("In which base are the integer and exponent parts of a float literal read?", "always interpreted using radix 10"),
    ("How do I put a literal curly brace in a format string?", 'it can be escaped by doubling: "{{" and "}}"'),
    ("Which names are not imported by from module import *?", '"_*" Not imported by "from module import *"'),
    ("What is the real part of an imaginary literal?", "yields a complex number with a real part of 0.0"),
    ("Is there a maximum length for integer literals?", "There is no limit for the length of integer literals"),
    ("What does id() return in CPython?", '"id(x)" is the memory address where "x" is stored'),
    ("Can a slice be the target of an assignment?", "Slicings may be used as expressions or as targets in assignment"),
    ("Which attribute holds the base classes of a class?", "The tuple of base classes of a class object"),
    ("Can I assign directly to a module's __dict__?", 'direct assignment to the "__dict__" attribute is not possible'),
    ("What does a bound method add when it is called?", 'it will add the "self" argument to the argument list'),
    ("What does using yield in a function definition do?", "sufficient to cause that definition to create a generator function"),
    ("How is the bitwise inversion of x defined?", 'The bitwise inversion of "x" is defined as "-(x+1)"'),
    ("If one operand is complex, what happens to the other in arithmetic?", "If either argument is a complex number, the other is converted to complex"),
    ("How do I get the type of an object?", 'An object’s type is accessed by the built-in function "type()"'),
    ("What is the only operation on a function object?", "The only operation on a function object is to call it"),
    ("How can user-defined objects customize their truth value?", 'providing a "__bool__()" method'),
    ("How many suites of an if statement are executed?", "It selects exactly one of the suites"),
    ("Does a break in a while loop run its else clause?", 'terminates the loop without executing the "else" clause’s suite'),
    ("What is the first step when a with statement runs?", "The context expression (the expression given in the \"with_item\") is evaluated to obtain a context manager"),
]

# (question, exact phrase of the answer passage, short fact the answer must state)
NL_QUESTIONS = [
    ("Hoeveel processorkernen per gigawatt verwacht de topman van Arm in het tijdperk van AI-agents?", "120 miljoen CPU-cores per GW", "120 miljoen"),
    ("Welk aandeel van de totale vertraging komt bij agentische taken voor rekening van toolverwerking op de processor?", "50–90% van de totale end-to-end latentie", "50–90%"),
    ("Wat kan een enkele grafische kaart kosten?", "meer dan $45.000", "45.000"),
    ("Hoeveel tokens per seconde genereert één H200 met Llama 3.1 8B bij chatwerk?", "7.464 generatie tokens/sec", "7.464"),
    ("Hoeveel Vera-processors zitten in één Vera Rubin NVL72-rek?", "72 Rubin GPU's met 36 Vera CPU's", "36"),
    ("Tot welk bedrag groeit de processormarkt volgens Morgan Stanley tegen 2030?", "$32,5 tot $60 miljard", "60 miljard"),
    ("Hoeveel sneller draait een sandbox op de Vera-chip dan op x86?", "1,8× snellere sandbox-prestaties", "1,8"),
    ("Welke SmolLM2-variant past helemaal in de cache van een telefoon?", "CPU-cache van moderne smartphones", "135M"),
    ("Hoe snel is een PCIe 4.0 x16-verbinding?", "31,5 GB/s voor een PCIe 4.0 x16", "31,5 GB/s"),
    ("Tot hoeveel bandbreedte biedt het gedeelde geheugen van Apple?", "bandbreedtes tot 800 GB/s", "800 GB/s"),
    ("Hoeveel vermogen vragen high-end videokaarten van de voeding?", "vaak 850W tot 1500W", "850W"),
    ("Welk modelformaat is de norm voor inferentie op een processor?", "vormt het GGUF-formaat", "GGUF"),
    ("Hoeveel tokens per seconde houd je in de praktijk over met een 8B-model op DDR5?", "circa 9 tot 11 tokens per seconde", "9 tot 11"),
    ("Vanaf welke promptlengte groeit de KV-cache sterk?", "meer dan 16.000 tokens", "16.000"),
    ("Welke bandbreedte levert gewoon DDR5-systeemgeheugen?", "bandbreedte van 50 tot 90 GB/s", "50 tot 90"),
    ("Wanneer draai je een model beter helemaal op de processor dan deels op de videokaart?", "minstens de helft van het model in het VRAM", "helft"),
    ("Hoe heet het alternatief van AMD voor CUDA?", "ROCm", "ROCm"),
    ("Hoeveel kernen hebben processors voor consumenten meestal?", "meestal 8 tot 24 bij chips voor consumenten", "8 tot 24"),
    ("Hoeveel werkgeheugen is genoeg voor een gekwantiseerd model van 7 miljard parameters?", "32 GB RAM", "32 GB"),
    ("Met welk hulpmiddel wordt op Arm naar INT4 gekwantiseerd?", "llmcompressor", "llmcompressor"),
    ("Hoeveel processorkernen per gigawatt hebben klassieke AI-datacenters nodig?", "30 miljoen CPU-cores per gigawatt", "30 miljoen"),
    ("Hoe snel levert een videokaart het eerste token bij een lang document?", "minder dan honderd milliseconden", "honderd milliseconden"),
    ("Hoe snel loopt een 8B-model op een videokaart met GDDR6X-geheugen?", "ruim 100 tokens per seconde", "100 tokens"),
    ("Wat is het theoretische maximum voor een gekwantiseerd 8B-model op dual-channel DDR5?", "13,6 tokens per seconde", "13,6"),
]

# English questions with a short fact the answer must state (the passage holds it)
EN_FACTS = [
    ("Which operator is used for matrix multiplication?", 'The "@" (at) operator', "@"),
    ("What exception does a generator raise when it returns?", 'will cause "StopIteration" to be raised', "StopIteration"),
    ("What is a left shift by n bits equivalent to?", 'multiplication with "pow(2,n)"', "pow(2"),
    ("What is the real part of an imaginary literal?", "yields a complex number with a real part of 0.0", "0.0"),
    ("How is the bitwise inversion of x defined?", 'The bitwise inversion of "x" is defined as "-(x+1)"', "-(x+1)"),
    ("Which special method implements len()?", 'Called to implement the built-in function "len()"', "__len__"),
    ("Which method lets user-defined objects customize their truth value?", 'providing a "__bool__()" method', "__bool__"),
    ("Which exception is raised when a name is not bound?", 'raises a "NameError" exception', "NameError"),
    ("Which module defines the interactive Python debugger?", 'The module "pdb" defines an interactive source code debugger', "pdb"),
    ("In which base are the integer and exponent parts of a float literal read?", "always interpreted using radix 10", "10"),
]

# more English facts for the dev set (written from the topics' text while tuning the answer side)
EN_FACTS_2 = [
    ("What kind of functions do lambda expressions create?", "used to create anonymous functions", "anonymous"),
    ("What is the null object called?", 'There is exactly one null object, named "None"', "None"),
    ("Which namespace is searched first when a name is resolved at the top level?", "The global namespace is searched first", "global namespace"),
    ("What is created from the iterable when a for loop starts?", "An *iterator* is created for that iterable", "iterator"),
    ("For how much code does a global declaration hold?", "holds for the entire current code block", "entire current code block"),
    ("What are exceptions a means of?", "Exceptions are a means of breaking out of the normal flow", "normal flow"),
    ("What does a lambda expression yield?", 'yields a function object', "function object"),
    ("Which string method turns all cased characters into capitals?", "converted to uppercase", "upper"),
    ("What does repeated concatenation of immutable sequences cost in runtime?", "will have a quadratic runtime", "quadratic"),
    ("Which string method swaps upper and lower case?", "uppercase characters converted to lowercase and vice versa", "swapcase"),
]

# questions none of the documents answer
ABSENT = [
    ("Wat is de hoofdstad van Australië?", "nl"),
    ("Hoeveel kost een abonnement op de AI300 per maand?", "nl"),
    ("Wie won het wereldkampioenschap voetbal in 1998?", "nl"),
    ("Hoeveel inwoners heeft Rotterdam?", "nl"),
    ("What is the boiling point of water on Mars?", "en"),
    ("Who wrote the novel Moby-Dick?", "en"),
    ("What is the population of Canada?", "en"),
    ("How many moons does Jupiter have?", "en"),
]


# --- held out: written 2026-11-30 before tuning the answer side; (question, exact phrase of the answer passage, short fact)
NL_HELDOUT = [
    ("Hoeveel lagen van het 32-lagenmodel gaan in het llama-cli-voorbeeld naar het videogeheugen?", "24 lagen draaien in GPU VRAM", "24"),
    ("Welke snelheid haalt een PCIe 5.0-slot?", "63 GB/s voor PCIe 5.0", "63 GB/s"),
    ("Hoeveel werkgeheugen neemt een 8B-model in als het naar 4 bit is gekwantiseerd?", "circa 5,5 GB aan werkgeheugen", "5,5 GB"),
    ("Hoeveel geheugen kan een model van 6 GB vragen als het contextvenster vol is?", "12 tot 16 GB aan geheugen", "12 tot 16"),
    ("Hoeveel langer duurt een berekening op de processor dan op een videokaart?", "tot tien keer langer duurt", "tien keer"),
    ("Over hoeveel jaar bekijk je de totale eigendomskosten van de hardware?", "periode van twee tot drie jaar", "twee tot drie jaar"),
    ("Hoeveel watt verbruikt het GPU-cluster in het voorbeeld van een bedrijfsserver?", "GPU-cluster van 700 watt", "700 watt"),
    ("Welke bandbreedte heeft een RTX 5090?", "meer dan 1.000 GB/s", "1.000 GB/s"),
    ("Tot welke grootte merk je het snelheidsverschil tussen processor en videokaart nauwelijks?", "maximaal 3 miljard parameters", "3 miljard"),
    ("Hoeveel was de infrastructuurdeal tussen OpenAI en AWS waard?", "infrastructuurpartnerschap van $38 miljard", "38 miljard"),
    ("Na hoeveel jaar bracht Arm opnieuw eigen productiesilicium uit?", "eerste productie-silicon in 35 jaar", "35 jaar"),
    ("Welke kwantisatieformaten zijn gemaakt voor videokaarten?", "AWQ (Activation-aware Weight Quantization) en EXL2", "AWQ"),
    ("Welke Intel-extensie gebruikt automatisch AMX voor BF16-bewerkingen?", "Intel Extension for PyTorch (IPEX)", "IPEX"),
    ("Hoe heet het open source testkader van Red Hat voor CPU-inferentie?", "(vllm-cpu-perf-eval)", "vllm-cpu-perf-eval"),
    ("Wie is de CEO van Intel die op Computex over agents sprak?", "Lip-Bu Tan, CEO van Intel", "Lip-Bu Tan"),
    ("Welke standen heeft de prestatieschakelaar van de AI300?", "(Stil / Gebalanceerd / Max)", "Gebalanceerd"),
]

EN_HELDOUT = [
    ("What error do you get when you divide a number by zero?", 'Division by zero raises the "ZeroDivisionError" exception', "ZeroDivisionError"),
    ("What does the modulo operator give you?", 'The "%" (modulo) operator yields the remainder', "remainder"),
    ("Which special method makes a new instance of a class?", "Called to create a new instance of class", "__new__"),
    ("Which method runs when an object is about to be destroyed?", "Called when the instance is about to be destroyed", "__del__"),
    ("Which method should a container define to support the in operator efficiently?", "Called to implement membership test operators", "__contains__"),
    ("What exception does a failing assert statement raise?", "if not expression: raise AssertionError", "AssertionError"),
    ("Which method of the context manager is called when a with block starts?", 'The context manager’s "__enter__()" method is invoked', "__enter__"),
    ("Which special method is used to evaluate self[key]?", 'Called to implement evaluation of "self[key]"', "__getitem__"),
    ("What is raised when a dictionary lookup uses a key that is not there?", 'Raises a "KeyError" if *key* is not in the map', "KeyError"),
    ("What else is the __del__ method called?", "This is also called a finalizer", "finalizer"),
    ("What type does dividing two integers with a single slash produce?", "Division of integers yields a float", "float"),
    ("Which method can a dict subclass define to handle keys that are not present?", 'defines a method "__missing__()"', "__missing__"),
]

ABSENT_HELDOUT = [
    ("Wie schilderde De Nachtwacht?", "nl"),
    ("Hoe hoog is de Mount Everest?", "nl"),
    ("Hoeveel kost een RTX 5090 in de winkel?", "nl"),
    ("Welke snelheid haalt een 70B-model op een MacBook met M3 Max?", "nl"),
    ("Who painted the Mona Lisa?", "en"),
    ("What is the speed of sound in air?", "en"),
    ("What is the default recursion limit in Python?", "en"),
    ("How much memory does a Python list of a million integers use?", "en"),
]
