"""Question sets for scripts/bench_rag.py (data only).

English: questions written from the text of CPython's `pydoc_data.topics` (not from search results),
each with a phrase of the answer passage; the answer documents are the topics whose text holds it.
Dutch: questions written from the three articles in ../shared/corpus-nl (paraphrased, not copied),
each with the exact phrase of the answer passage and a short fact the answer must state.
Declines: questions the documents do not answer.
Held out (NL_FACTS_HELDOUT, EN_FACTS_HELDOUT, ABSENT_HELDOUT): written before the answer side was tuned, from other facts
of the same texts, and never used to choose a setting; report them apart from the dev sets above.
Retrieval held out (EN_HELDOUT, NL_HELDOUT): questions with an answer phrase, written after the ranking work began.
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

# held out: written after the ranking work began and never used to choose a setting; report them apart
EN_HELDOUT = [
    ("What does the finally clause do when the try block raises an exception?", "the exception is temporarily saved"),
    ("What happens if a finally clause executes a return statement?", "the saved exception is discarded"),
    ("Which format spec option adds a thousands separator?", "option signals the use of a comma for a thousands separator"),
    ("How do I centre text within a given width in a format string?", "Forces the field to be centered within the available"),
    ("What does str.strip() remove when called without arguments?", "defaults to removing whitespace"),
    ("What does str.splitlines() split on?", "Return a list of the lines in the string, breaking at line boundaries"),
    ("What does the zfill method of strings return?", "Return a copy of the string left filled with ASCII"),
    ("Which method should a class define to support the in operator?", "Called to implement membership test operators"),
    ("What should __repr__ return ideally?", "this should look like a valid Python expression"),
    ("What is __init_subclass__ used for?", "This method is called whenever the containing class is subclassed"),
    ("What does __slots__ prevent?", "deny the creation of \"__dict__\" and *__weakref__*"),
    ("Does list.sort() make a new list or change the existing one?", "This method sorts the list in place"),
    ("What does s * n do for a sequence when n is negative?", "Values of *n* less than \"0\" are treated as \"0\""),
    ("What does dict.setdefault do?", "If *key* is in the dictionary, return its value. If not, insert *key* with a value of *default*"),
    ("Which dictionary method removes and returns the last inserted pair?", "Remove and return a \"(key, value)\" pair from the dictionary"),
    ("What does the | operator do on two dictionaries?", "Create a new dictionary with the merged keys and values of *d* and *other*"),
    ("What does the star in a function parameter list mean for the following parameters?", "keyword-only parameters"),
    ("When are default parameter values evaluated?", "Default parameter values are evaluated from left to right when the function definition is executed"),
    ("What is the result type of true division of two integers?", "Division of integers yields a float"),
    ("What does floor division do with the result?", "the result is that of mathematical division with the ‘floor’ function applied to the result"),
    ("Which exception does the % operator raise for a zero right operand?", "The modulo operator always yields a result with the same sign as its second operand"),
    ("What does the global statement declare?", "listed identifiers are to be interpreted as globals"),
    ("What does the async for statement iterate over?", "asynchronous iterable"),
    ("What gets bound to the name after as in a with statement?", "will bind this method’s return value to the target(s) specified in the \"as\" clause"),
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

# held out (as EN_HELDOUT): more paraphrased Dutch questions, (question, exact phrase of the answer passage)
NL_HELDOUT = [
    ("Welke verhouding tussen CPU's en GPU's zag je in datacenters toen het trainen van modellen centraal stond?", "ongeveer 1 tot 2 CPU's voor elke 8 GPU's"),
    ("Hoeveel processors per videokaart zetten sommige klanten in voor agents?", "4 CPU's per GPU worden ingezet"),
    ("Welke verhouding tussen processors en GPU's geldt nu bij inferentie?", "~1 CPU per 4 GPU's"),
    ("Wanneer sloten OpenAI en Amazon hun grote infrastructuurdeal?", "Tekenden in november 2025"),
    ("Na hoeveel jaar bracht Arm weer een eigen chip in productie?", "eerste productie-silicon in 35 jaar"),
    ("Welk soort geheugen gebruikt de Vera-processor van NVIDIA?", "LPDDR5X memory met SOCAMM"),
    ("Op welke architecturen draait de processor-backend van vLLM?", "Arm AArch64"),
    ("Met welke omgevingsvariabele bepaal je hoeveel ruimte de KV-cache krijgt in vLLM op de processor?", "VLLMCPUKVCACHE_SPACE"),
    ("Hoe groot zijn de modellen van SmolLM2?", "van 135M tot 1,7B parameters"),
    ("Waarom is privacy een reden om een taalmodel in huis te draaien?", "data de controle van de organisatie verlaat"),
    ("Met welk beroep wordt de rol van de processor in een klassieke chatbotopstelling vergeleken?", "fungeert de CPU als een receptionist"),
    ("Welke soort vermenigvuldiging domineert het decoderen van één token?", "matrix-vector-vermenigvuldiging (GEMV)"),
    ("Hoe schat je de maximale decodeersnelheid ruwweg in?", "Geheugenbandbreedte (GB/s) / Modelgrootte in werkgeheugen (GB)"),
    ("Welke kwantisatieformaten presteren beter op een aparte videokaart?", "Activation-aware Weight Quantization"),
    ("Hoe snel is een PCIe 5.0-slot?", "63 GB/s voor PCIe 5.0"),
    ("Met welke optie van llama.cpp zet je een deel van de lagen op de videokaart?", "(-ngl 24)"),
    ("Met welk programma meet je gestandaardiseerd de snelheid van llama.cpp?", "./llama-bench"),
    ("Hoeveel geheugen kan een model ineens vragen als de context helemaal vol is?", "plotseling 12 tot 16 GB aan geheugen"),
    ("Wat gebeurt er als een model met context niet in het videogeheugen past?", "Out-Of-Memory foutmelding"),
    ("Over hoeveel jaar reken je de totale eigendomskosten van hardware?", "periode van twee tot drie jaar"),
    ("Hoeveel vermogen gebruikt het GPU-cluster in het rekenvoorbeeld over stroomkosten?", "GPU-cluster van 700 watt"),
    ("Vanaf welke promptgrootte kies je beter voor een videokaart?", "meer dan 2000 tokens"),
    ("Welke continue snelheid vraagt om GPU-versnelling bij grotere modellen?", "boven de 25 tokens per seconde"),
    ("Tot welke modelgrootte merk je op de processor nauwelijks snelheidsverschil?", "maximaal 3 miljard parameters"),
    ("Hoeveel langer rekent een processor dan een videokaart, en wat betekent dat voor het stroomverbruik?", "tot tien keer langer duurt"),
    ("Wie leidt Intel en wat zei hij over agents op Computex?", "Lip-Bu Tan"),
    ("Welke onderzoekers maten hoeveel vertraging toolverwerking veroorzaakt?", "Georgia Tech"),
    ("Welke tool van Red Hat hoort bij het drie-fasen testraamwerk?", "GuideLLM"),
    ("Welke software maakt het opzetten van de AI300 makkelijker?", "CORSAIR AI-softwarestack"),
    ("Voor welke Xeon-generaties zijn de modellen in de catalogus van Intel geoptimaliseerd?", "Xeon Gen 4–6"),
    ("Welke functies van vLLM waren vroeger alleen voor videokaarten beschikbaar?", "continuous batching, PagedAttention"),
    ("Waarom lopen processors vast als veel gebruikers tegelijk vragen stellen?", "wachttijd per gebruiker lineair oploopt"),
    ("Hoe voorkom je dat processors tijdens een lange meting trager gaan lopen?", "voldoende koeling te waarborgen"),
    ("Welk geheugen deelt Apple tussen processor, GPU en Neural Engine?", "Unified Memory Architecture (UMA)"),
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
NL_FACTS_HELDOUT = [
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

EN_FACTS_HELDOUT = [
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


# retrieval blind set: written from the pydoc topics' text before the document-level fusion change
EN_FUSION_BLIND = [
    ("Can 1 and 1.0 be used as the same key in a dictionary?", "can be used interchangeably to index the same dictionary entry"),
    ("What does d[key] call in a dict subclass when the key is missing?", 'the "d[key]" operation calls that method with the key *key* as argument'),
    ("Why is a list a bad value for dict.fromkeys?", "All of the values refer to just a single instance"),
    ("How do I set a breakpoint in pdb that goes away after it is hit once?", "Temporary breakpoint, which is removed automatically when it is first hit"),
    ("What is the difference between the step and next debugger commands?", '"step" stops inside a called function'),
    ("What happens when I press enter on an empty line at the debugger prompt?", "Entering a blank line repeats the last command entered"),
    ("How do I type several debugger commands on one line?", 'Multiple commands may be entered on a single line, separated by ";;"'),
    ("Which startup file does the debugger read from the home directory?", '".pdbrc" exists in the user’s home directory'),
    ("What happens to the name bound with as at the end of an except clause?", 'it is cleared at the end of the "except" clause'),
    ("What are except* clauses for?", 'clause(s) are used for handling "ExceptionGroup"s'),
    ("Which names does a star import bind when the module defines __all__?", 'The names given in "__all__" are all considered public'),
    ("Can I use from module import * inside a function?", "is only allowed at the module level"),
    ("When is __init__ skipped after __new__?", 'If "__new__()" does not return an instance of *cls*'),
    ("What happens if __init__ returns something other than None?", 'will cause a "TypeError" to be raised at runtime'),
    ("Does del x call the object's __del__ method right away?", 'doesn’t directly call "x.__del__()"'),
    ("What happens to an exception raised inside __del__?", "exceptions that occur during their execution are ignored"),
    ("Which method is called for every attribute access on an instance?", "Called unconditionally to implement attribute accesses for instances of the class"),
    ("What turns a descriptor into a data descriptor?", "changes the kind of descriptor to a “data descriptor”"),
    ("What happens if range gets a step of zero?", 'If *step* is zero, "ValueError" is raised'),
    ("Why does a range object take less memory than a list?", "will always take the same (small) amount of memory"),
    ("Which common sequence operations do range objects lack?", "all of the common sequence operations except concatenation and repetition"),
    ("Is a NaN value equal to itself?", "not-a-number values are not equal to themselves"),
    ("How should I compare a value with None according to PEP 8?", 'comparisons for singletons should always be done with "is" or "is not"'),
    ("Can a frozenset be used as a dictionary key?", "it can be used again as an element of another set, or as a dictionary key"),
    ("Which identifiers are soft keywords?", 'The identifiers "match", "case" and "_" can syntactically act as keywords'),
    ("What does defining __index__ tell Python about a numeric class?", "Presence of this method indicates that the numeric object is an integer type"),
    ("What model of error handling does Python follow?", "Python uses the “termination” model of error handling"),
    ("For which unhandled exception does the interpreter not print a traceback?", 'it prints a stack traceback, except when the exception is "SystemExit"'),
]


# --- blind (answers): written 2026-11-30 before any change to the answer side of this round, measured once on the
# unchanged code and once at the end; never used to choose a setting. (question, exact phrase of the answer passage,
# short fact the answer must state); absent: questions no document answers, (question, language).
NL_FACTS_BLIND = [
    ("Hoe heet de topman van Arm?", "Arm CEO Rene Haas schat", "Rene Haas"),
    ("Hoeveel meer bandbreedte per kern heeft de Vera-processor dan een x86-chip?", "3× bandbreedte per core", "3×"),
    ("Welke bandbreedte heeft dual-channel DDR5 effectief in het rekenvoorbeeld met het 8B-model?", "effectief zo'n 75 GB/s bandbreedte", "75 GB/s"),
    ("Welk soort matrixbewerking gebeurt er tijdens de prefill-fase?", "General Matrix Multiply of GEMM", "GEMM"),
    ("Hoe groot zijn de modellen die je met 4-bit kwantisatie zonder problemen op bescheiden hardware zet?", "modellen van 7 tot 14 miljard parameters", "7 tot 14 miljard"),
    ("Op welke AWS-processor is de route met oneDNN en INT4 al in productie getest?", "AWS Graviton4", "Graviton4"),
    ("Met welke omgevingsvariabele zet je bij vLLM op de processor de OpenMP-threads vast?", "VLLMCPUOMPTHREADSBIND", "VLLMCPUOMPTHREADSBIND"),
    ("Met welk lichaamsdeel wordt de GPU vergeleken?", "De GPU is de wiskundige spier", "spier"),
    ("Hoeveel lagen blijven in het llama-cli-voorbeeld in het gewone werkgeheugen?", "de overige 8 lagen blijven in RAM", "8 lagen"),
    ("Welk kwantisatieformaat hebben de 8B- en 70B-modellen in de praktijkmetingen?", "beide gekwantiseerd naar 4-bit precisie (Q4_K_M)", "Q4_K_M"),
    ("Met welke instructiesets rekenen AMD- en Intel-chips meerdere 8-bit getallen in één klokcyclus?", "Met AVX2 en AVX-512 kunnen moderne AMD- en Intel-processors", "AVX-512"),
    ("Wat is de oorspronkelijke precisie van modelgewichten voordat ze gekwantiseerd worden?", "oorspronkelijke 16-bit drijvende-kommagetal", "16-bit"),
    ("Uit welk kwartaal komen de cijfers van Intel over de verhouding tussen CPU's en GPU's?", "Q1 2026 earnings call van Intel", "Q1 2026"),
    ("Welk merk maakt het AI Workstation 300?", "CORSAIR AI Workstation 300 (AI300)", "CORSAIR"),
    ("Welke leessnelheid haalt een consumentenprocessor met kleine modellen voor één gebruiker?", "boven de 10 tokens per seconde", "10 tokens"),
]

EN_FACTS_BLIND = [
    ("What value does str.find give back when the substring cannot be found?", 'Return "-1" if *sub* is not found', "-1"),
    ("Which exception does str.index raise when the substring is missing?", 'but raise "ValueError" when the substring is not found', "ValueError"),
    ("Which encoding does str.encode use when you do not pass one?", "*encoding* defaults to \"'utf-8'\"", "utf-8"),
    ("Which exception do you get when a local variable is read before anything was assigned to it?", 'an "UnboundLocalError" exception is raised', "UnboundLocalError"),
    ("What prompt does pdb show to tell you that you are in debug mode?", 'The debugger’s prompt is "(Pdb)"', "(Pdb)"),
    ("Which built-in function can you call instead of import pdb; pdb.set_trace() to stop in the debugger?", 'The built-in "breakpoint()", when called with defaults', "breakpoint"),
    ("What value does dict.fromkeys give every key when no value is passed?", '*value* defaults to "None"', "None"),
    ("What kind of copy does the copy method of a dictionary return?", "Return a shallow copy of the dictionary", "shallow"),
    ("Up to which code point does str.isascii count characters as ASCII?", "code points in the range U+0000-U+007F", "U+007F"),
    ("In which section of the Unicode Standard is the casefolding algorithm described?", "described in section 3.13 of the Unicode Standard", "3.13"),
    ("Which modules does the extension interface of the debugger use?", 'The extension interface uses the modules "bdb" and "cmd"', "bdb"),
    ("When a key occurs several times while building a dictionary, which value does it get?", "the last value for that key becomes the corresponding value", "last value"),
    ("What is the largest integer a bytearray accepts as an item?", '"0 <= x <= 255"', "255"),
    ("Which exception does a from-import raise when the module has no attribute of that name?", 'if the attribute is not found, "ImportError" is raised', "ImportError"),
    ("What do the Boolean operations or and and return, instead of True or False?", 'always return one of their operands', "operands"),
]

ABSENT_BLIND = [
    ("Hoeveel kost een Vera Rubin NVL72-rek?", "nl"),
    ("Hoeveel werkgeheugen zit er standaard in de CORSAIR AI300?", "nl"),
    ("Welke kloksnelheid heeft de Vera-processor van NVIDIA?", "nl"),
    ("Wie is de oprichter van Hugging Face?", "nl"),
    ("Hoeveel stroom verbruikt een Apple Mac Studio onder volle belasting?", "nl"),
    ("Which port does Python's built-in HTTP server listen on by default?", "en"),
    ("Which command installs a package with pip?", "en"),
    ("Who created the Python programming language?", "en"),
    ("What is the time complexity of inserting at the front of a list?", "en"),
    ("Which year was Python 3.0 released?", "en"),
]

# --- blind 2 (answers): written 2026-11-30 19:10 before any change of the second answer round, measured once on the
# unchanged code and once at the end; never used to choose a setting. Paraphrased (synonyms, metaphors, in-topic
# absent questions). (question, exact phrase of the answer passage, short fact); absent: (question, language).
NL_FACTS_BLIND2 = [
    ("Welke verhouding tussen processors en videokaarten ziet Intel in sommige gevallen bij agents?", "4:1 bij agentic deployments", "4:1"),
    ("In hoeveel losse modelaanroepen kan één opdracht van een gebruiker uiteenvallen?", "opgesplitst in tientallen individuele model-calls", "tientallen"),
    ("Hoe heet de processor die Arm in maart op de markt bracht?", "Lanceerde in maart de AGI CPU", "AGI CPU"),
    ("Naar welke verhouding tussen processors en GPU's schuift NVIDIA met het Vera Rubin-rek op?", "naar een 1:2 ratio", "1:2"),
    ("Welk mainframeplatform van IBM ondersteunt de processor-backend van vLLM ook?", "IBM Z", "IBM Z"),
    ("Met welke omgevingsvariabele zet je in vLLM de experimentele kernels voor kleine batches aan?", "VLLMCPUSGL_KERNEL", "VLLMCPUSGL_KERNEL"),
    ("Hoe heten de matrix-eenheden die Nvidia in zijn chips stopt?", "zoals de Tensor Cores op Nvidia-chips", "Tensor Cores"),
    ("Hoeveel bandbreedte heeft het GDDR6X-videogeheugen in het rekenvoorbeeld?", "GDDR6X-geheugen (1000 GB/s bandbreedte)", "1000 GB/s"),
    ("Hoe lang wacht je op een processor op het eerste token van een document van 4000 tokens?", "enkele seconden doet om het eerste antwoordtoken", "enkele seconden"),
    ("Waar staat de afkorting EXL2 voor?", "EXL2 (ExLlamaV2)", "ExLlamaV2"),
    ("Binnen welk project is het GGUF-formaat ontstaan?", "ontwikkeld binnen het open source llama.cpp-ecosysteem", "llama.cpp"),
    ("Met welke beroepsgroep vergelijkt het artikel de kernen van een processor?", "een paar zeer snelle werknemers", "werknemers"),
    ("Waaraan dankt NVIDIA vooral zijn voorsprong op de markt voor lokale AI?", "vooral dankzij CUDA", "CUDA"),
    ("Welke programma ondersteunt AMD Radeon-kaarten uitdrukkelijk onder Windows?", "Ollama bieden expliciete ondersteuning voor AMD Radeon", "Ollama"),
]

EN_FACTS_BLIND2 = [
    ("What happens when the pass statement runs?", "when it is executed, nothing happens", "nothing happens"),
    ("Which built-in variable is True normally and False when Python is asked to optimize?", 'the built-in variable "__debug__" is "True" under normal circumstances', "__debug__"),
    ("What character fills the extra room when str.center widens a string?", "(default is an ASCII space)", "space"),
    ("Which attribute of the new exception holds the one given after from in a raise statement?", 'attached to the raised exception as the "__cause__" attribute', "__cause__"),
    ("What does a raise statement with no expression do?", 're-raises the exception that is currently being handled', "currently being handled"),
    ("Which method is called for the expression x<y?", '"x<y" calls "x.__lt__(y)"', "__lt__"),
    ("What does str.zfill pad the string with on the left?", "left filled with ASCII", "0"),
    ("Which exception does str.join raise when the iterable holds something that is not a string?", 'A "TypeError" will be raised if there are any non- string values in *iterable*', "TypeError"),
    ("What does str.partition give back?", "return a 3-tuple containing the part before the separator", "3-tuple"),
    ("How are strings ordered when they are compared?", "compare lexicographically using the numerical Unicode code points", "lexicographically"),
    ("What is the name of the single built-in ellipsis object?", 'There is exactly one ellipsis object, named "Ellipsis"', "Ellipsis"),
    ("What does the break statement end?", "It terminates the nearest enclosing loop", "nearest enclosing loop"),
]

ABSENT_BLIND2 = [
    ("Hoeveel kernen heeft de AGI CPU van Arm?", "nl"),
    ("Welk besturingssysteem draait standaard op de CORSAIR AI300?", "nl"),
    ("Hoeveel tokens per seconde haalt een 70B-model op een Apple M4 Ultra?", "nl"),
    ("Wanneer verschijnt de opvolger van de Vera-processor?", "nl"),
    ("Which company employs most of the Python core developers?", "en"),
    ("How many bytes does a Python float object occupy in memory?", "en"),
    ("What is the default timeout of urllib requests?", "en"),
    ("Which sorting algorithm does list.sort use internally?", "en"),
]

# --- blind 3 (answers): written 2026-11-30 21:20 before any change of the third answer round (answerability check,
# passage and sentence choice), measured once on the unchanged code and once at the end; never used to choose a
# setting. Facts of the articles and topics no earlier set asks about, paraphrased; the absent questions are mostly
# about the documents' own entities (the AI300, the Vera CPU, pdb), asking a fact they do not hold.
# (question, exact phrase of the answer passage, short fact); absent: (question, language).
NL_FACTS_BLIND3 = [
    ("Naar welke verhouding tussen processors en videokaarten bewegen agentische werklasten volgens de cijfers van Intel?",
     "Agentische workloads: Convergeren naar 1:1", "1:1"),
    ("Welke bekende chatassistenten gebruiken denkstappen bij ingewikkelde vragen?", "Populaire assistenten zoals Claude en ChatGPT", "Claude"),
    ("Op welk evenement deed de baas van Intel zijn uitspraak over reinforcement learning?", "stelde tijdens Computex 2026", "Computex"),
    ("Met welke factor groeit volgens Arm het aantal processorkernen per gigawatt door AI-agents?", "een viervoudige toename", "viervoudig"),
    ("In welke eenheid drukt men het latentiebudget van realtime toepassingen uit?", "wordt het latentiebudget gemeten in milliseconden", "milliseconden"),
    ("In welke sectoren wordt het versturen van gegevens naar een cloudaanbieder steeds minder aanvaard?",
     "In de zorg, finance en juridische sector", "zorg"),
    ("Welke techniek maakt het prestatieverschil tussen kleine en grote taalmodellen veel kleiner?",
     "aangevuld met retrieval-augmented generation (RAG)", "retrieval-augmented generation"),
    ("Wanneer bracht NVIDIA de Vera-processor op de markt?", "Lanceerde in maart 2026 de Vera CPU", "maart 2026"),
    ("Waar heeft Red Hat een verzameling gevalideerde modellen staan?", "collectie gevalideerde modellen op Hugging Face", "Hugging Face"),
    ("Welke technologie van Intel wijst aparte hardware toe aan tweedimensionale matrixbewerkingen?",
     "Intel AMX (Advanced Matrix Extensions), aanwezig op moderne Xeon-processors", "AMX"),
    ("Tot welke kleinste precisie kunnen modelgewichten bij kwantisatie worden teruggebracht?", "of zelfs 2-bit integers", "2-bit"),
    ("Hoe stel je vast dat het werkgeheugen echt met meerdere kanalen werkt?", "draait via BIOS-verificatie", "BIOS"),
    ("Hoe groot noemt het artikel het verschil in bandbreedte tussen DDR5-systeemgeheugen en een RTX 5090?",
     "een verschil van een hele orde van grootte", "orde van grootte"),
    ("Bij welk model raakt een systeem oververhit in het voorbeeld waarmee de AI300 wordt aangeprezen?", "zodra je een 13B-model laadt", "13B"),
]

EN_FACTS_BLIND3 = [
    ("Which element does a list's pop method take out when it is called without an argument?", "by default the last item is removed and returned", "last item"),
    ("What error do you get when you ask a list to remove a value it does not contain?", '"remove()" raises "ValueError" when *x* is not found in *s*', "ValueError"),
    ("Why does reversing a list in place not hand back the reversed list?", "To remind users that it operates by side effect", "side effect"),
    ("How are numbers aligned by default in a format specification?", "Forces the field to be right-aligned", "right-aligned"),
    ("What does putting a 0 before the width in a format spec enable for numeric values?", "enables sign-aware zero-padding for numeric types", "zero-padding"),
    ("Which function does the !r conversion apply to the value in a format string?", "\"'!r'\" which calls \"repr()\"", "repr"),
    ("Which class attribute holds the classes that are looked at during method resolution?", "class.__mro__", "__mro__"),
    ("What is the one special operation a module object supports?", "The only special operation on a module is attribute access", "attribute access"),
    ("Why may a nonzero decimal integer literal not start with a zero?", "disambiguation with C-style octal literals", "octal"),
    ("What is the largest length CPython allows a container to report?", 'the length is required to be at most "sys.maxsize"', "sys.maxsize"),
    ("Which method is called on the parent whenever a class is derived from it?", '"__init_subclass__()" is called on the parent class', "__init_subclass__"),
    ("Which special method lets a container supply its own backwards iteration?", 'object.__reversed__(self) Called (if present) by the "reversed()" built-in', "__reversed__"),
]

ABSENT_BLIND3 = [
    ("Hoeveel kost de CORSAIR AI300?", "nl"),
    ("Hoeveel videogeheugen heeft een RTX 5090?", "nl"),
    ("Hoeveel kernen heeft de Vera-processor van NVIDIA?", "nl"),
    ("Wie is de topman van NVIDIA?", "nl"),
    ("Wat is de hoofdstad van Noorwegen?", "nl"),
    ("Which TCP port does pdb listen on for remote debugging sessions?", "en"),
    ("Who wrote the pdb module?", "en"),
    ("How many bytes does an empty dictionary use?", "en"),
    ("How often does the cyclic garbage collector run by default?", "en"),
    ("What is the capital of Peru?", "en"),
]

# --- blind 4 (answers): written 2026-11-30 23:55 before any change of the fourth answer round (rare-term retrieval,
# the decline on an unasked relation, Dutch inflection), measured once on the unchanged code and once at the end;
# never looked at answer by answer. Facts no earlier set asks about, phrased as users type them (informal Dutch,
# typos, lists, figures, versions); the absent questions mostly name an entity of the documents and ask a fact they
# do not hold. (question, exact phrase of the answer passage, short fact); absent: (question, language).
# On main's code (6e752fc), default model, k=4: facts 0.628 (nl 0.60, en 0.667), absent declined 0.357. Then measured
# (aggregates only) four times more in that round: all its changes, two with one change off each, and the kept ones
# (facts 0.628, absent 0.571): it chose which changes stay, so the next round needs a fresh set.
NL_FACTS_BLIND4 = [
    ("waar staat JSON eigenlijk voor?", "JavaScript Object Notation (JSON)", "JavaScript Object Notation"),
    ("Als de GPU de spierkracht is, wat is de CPU dan volgens het artikel?", "de CPU is de logische motor die de show regisseert", "logische motor"),
    ("wat doet de cpu met een verzoek dat binnenkomt bij de api-server?", "waar de CPU het tokeniseert en plant", "tokeniseert"),
    ("Tot wanneer blijft de GPU tokens genereren in de klassieke chatbot-opzet?", "tot er een end-of-sequence token wordt uitgezonden", "end-of-sequence"),
    ("wat was de cpu gpu verhouding bij trainen volgens intel", "verschuift van 1:8 bij trainingsworkloads", "1:8"),
    ("Noem eens een paar realtime toepassingen waarvoor elke milliseconde telt", "spraakinterfaces, autonome systemen en industriële monitoring", "spraakinterfaces"),
    ("Wat kost inferentie op servers die je al hebt staan aan extra hardware?", "bijna nul marginale hardwarekosten", "bijna nul"),
    ("Voor welk jaar geldt de schatting van Morgan Stanley over de groei van de processormarkt?", "$32,5 tot $60 miljard tegen 2030", "2030"),
    ("Hoeveel meer geheugenbandbreedte heeft de Vera dan een x86-processor met DDR5?", "2× geheugenbandbreedte", "2×"),
    ("welke bibliotheken gebruik je op Arm in het getestte productiestraject met INT4?", "oneDNN en de Arm Compute Library", "oneDNN"),
    ("Is Apple Silicon al volwaardig ondersteund in de CPU-backend van vLLM?", "Apple Silicon (experimenteel)", "experimenteel"),
    ("In welke eenheid geef je de KV-cacheruimte op bij vllm op de cpu?", "allocatie KV cache in GB", "GB"),
    ("Waarom is de verschuiving naar 1:1 volgens de conclusie blijvend?", "inferentie die iteratief wordt in plaats van single-shot", "iteratief"),
    ("Uit welke twee fases bestaat het draaien van een taalmodel?", "de prefill-fase (waarin de ingevoerde prompt wordt verwerkt) en de decode-fase", "decode"),
    ("Bij wat voor serverconfiguratie gaat de bandbreedte van de processor echt meetellen?", "overstappen naar octa-channel serverconfiguraties", "octa-channel"),
    ("welke promptlengtes worden als voorbeeld genoemd voor gestandaardiseerde metingen?", "exact 512, 1024 of 2048 tokens", "512"),
    ("hoeveel threads gebruikt het llama-bench commando uit het artikel?", "-p 512,2048 -n 128 -t 16", "16"),
    ("Hoe groot mag een model zijn om het nog op de processor te draaien volgens de beslisregels?", "1B tot 8B parameters met 4-bit kwantisatie", "1B tot 8B"),
    ("Noem wat taken die prima 's nachts op een CPU kunnen draaien", "nachtelijke samenvattingen, e-mailclassificatie of periodieke data-extractie", "e-mailclassificatie"),
    ("Als rekenkracht het niet is, wat remt lokale LLM-inferentie dan meestal af?", "Dat is de geheugenbandbreedte wel.", "geheugenbandbreedte"),
    ("Met welke programmas heb je op windows de minste gedoe met een nvidia kaart?", "Als je LM Studio, Ollama of llama.cpp op Windows gebruikt", "LM Studio"),
    ("Welk merk videokaart koop je nu het veiligst voor lokale AI?", "NVIDIA op dit moment de veiligere keuze", "NVIDIA"),
    ("hoe grote modellen passen er in het werkgeheugen van een mac met unified memory?", "modellen van 70B parameters volledig in het werkgeheugen", "70B"),
    ("welke fucnties van vllm werken nu ook op de cpu naast continuous batching?", "prefix caching, chunked prefill en tensor parallelism", "prefix caching"),
    ("Waarvoor is gewoon desktopgeheugen eigenlijk ontworpen?", "lage willekeurige toegangstijden (lage latency)", "toegangstijden"),
]

EN_FACTS_BLIND4 = [
    ("what happens if you raise 0.0 to a negative power in python", 'Raising "0.0" to a negative power results in a "ZeroDivisionError"', "ZeroDivisionError"),
    ("What does 10**-2 give?", 'but "10**-2" returns "0.01"', "0.01"),
    ("What type of number comes out when a negative number is raised to a fractional power?",
     'Raising a negative number to a fractional power results in a "complex"', "complex"),
    ("whats the default tabsize for str.expandtabs", "(default is 8, giving tab positions", "8"),
    ("In which order does dict.popitem hand back its pairs?", "Pairs are returned in LIFO (last-in, first-out) order", "LIFO"),
    ("What can't a function made with lambda contain?", "cannot contain statements or annotations", "statements"),
    ("Which command-line switch makes __debug__ False?", 'line option "-O")', "-O"),
    ("Which exception is raised when an async generator is finished?", 'will cause "StopAsyncIteration" to be raised', "StopAsyncIteration"),
    ("What does a function give back when its return statement has no expression?", 'If an expression list is present, it is evaluated, else "None" is substituted', "None"),
    ("Names declared nonlocal refer to variables in which scope?", "previously bound variables in the nearest enclosing scope excluding globals", "nearest enclosing scope"),
    ("Since which Python version can I put underscores in numeric literals?", "Changed in version 3.6: Underscores are now allowed for grouping", "3.6"),
    ("Which special method do I implement to customise the ** operator?", 'This operation can be customized using the special "__pow__()" method', "__pow__"),
    ("Which method makes my objects callable like a function?", "Called when the instance is “called” as a function", "__call__"),
    ("What does the % presentation type in a format spec do with the number?", "Multiplies the number by 100", "100"),
    ("How do you write a tuple that has just one item?", "Using a trailing comma for a singleton tuple", "comma"),
    ("What does unary plus do to its operand?", "yields its numeric argument unchanged", "unchanged"),
    ("Which special method overrides the ~ operator?", 'custom objects that override the "__invert__()" special method', "__invert__"),
    ("In a chain like x < y <= z, how often is y evaluated?", '"y" is evaluated only once', "once"),
]

ABSENT_BLIND4 = [
    ("Hoeveel geheugen heeft een H200?", "nl"),
    ("Hoeveel tokens per seconde haalt het 70B-model op dual-channel DDR5?", "nl"),
    ("Hoeveel threads gebruikt llama-bench standaard als je geen -t opgeeft?", "nl"),
    ("Wie is de topman van AMD?", "nl"),
    ("Hoeveel weegt de CORSAIR AI300?", "nl"),
    ("Hoeveel medewerkers heeft Red Hat?", "nl"),
    ("wanneer kwam ROCm voor het eerst uit?", "nl"),
    ("Wat is het stroomverbruik van de Vera CPU in watt?", "nl"),
    ("Which hash function does Python use for strings?", "en"),
    ("How much does NVIDIA's Vera CPU cost?", "en"),
    ("Who founded Red Hat?", "en"),
    ("How many arguments can a Python function take at most?", "en"),
    ("How many built-in exception classes does Python define?", "en"),
    ("How fast is a dictionary lookup compared to searching a list?", "en"),
]

# --- blind 5 (answers): written 2026-12-01 02:40 before any change of the fifth answer round (declines instead of a
# quote that does not answer, quote choice), measured once on the unchanged code and once at the end; never used to
# choose a setting. Facts no earlier set asks about, phrased as users type them (informal, typos, Dutch words for the
# articles' English loanwords, paraphrase); the absent questions sit next to the documents' topics so that retrieval
# finds something related. (question, exact phrase of the answer passage, short fact); absent: (question, language).
# On main's code (4dd9b65), default model, k=4: facts 0.487 (nl 0.478, en 0.50), absent declined 0.60; after the fifth
# round (3122eac) exactly the same answers (its rules did not fire here). Its failures were read after that measurement
# (answer_failures.py), so the next round needs a fresh set.
NL_FACTS_BLIND5 = [
    ("waar is een cpu nou eigenlijk in gespecialiseerd, als een gpu om flops draait?", "CPU's specialiseren zich in instructie-latentie", "instructie-latentie"),
    ("Welke rol krijgt de processor in de ouderwetse inferentieopzet volgens de tussenkop?", "De traditionele inferentie-stack: de CPU als passagier", "passagier"),
    ("Door hoeveel hoofdoorzaken komt de trend naar kleinere lokale modellen?", "Dit wordt gedreven door vier hoofdfactoren", "vier"),
    ("waarom valt gpu-rekenen in de cloud vaak af bij toepassingen aan de rand van het netwerk?", "werken vaak zonder betrouwbare internetverbinding", "internetverbinding"),
    ("Na welke stap doen kleine taalmodellen het op hun vakgebied zelfs beter dan de grote?", "keert zelfs volledig om bij domeinspecifieke taken na fine-tuning", "fine-tuning"),
    ("tot hoeveel nvidia kaarten krijgt openai toegang door die deal met amazon?", "toegang tot honderdduizenden NVIDIA GPU's", "honderdduizenden"),
    ("Op welk niveau moet je de processor afschermen van andere processen als je inferentie meet?", "zorgvuldige scheiding op socket- of node-niveau", "socket"),
    ("Hoe heet de verzameling kant-en-klare modellen van Intel voor Xeon?", "Intel's AI Software Catalog", "AI Software Catalog"),
    ("moet ik mijn applicatie herschrijven als ik met vllm later van cpu naar gpu overstap?", "kan migreren naar GPU zonder wijzigingen in de applicatielaag", "zonder wijzigingen"),
    ("Wat gebeurt er volgens de conclusie met de vraag naar Intels Xeon-processors?", "Intel ziet de vraag naar Xeon stijgen boven het aanbod", "boven het aanbod"),
    ("waarom haal je in het echt geen 13,6 tokens per seconde met dat 8B-model?", "kernel-overhead en context-beheer ervoor dat hier circa 9 tot 11", "kernel-overhead"),
    ("Wat wordt er bedoeld met rekenkundige intensiteit?", "het aantal floating-point operaties per getransporteerde byte", "per getransporteerde byte"),
    ("In welke eenheid wordt de ruwe rekenkracht van een consumentenvideokaart voor INT4 en FP16 uitgedrukt?", "in de honderden tot duizenden TFLOPS loopt", "TFLOPS"),
    ("wat is ttft voluit?", "Time-to-First-Token (TTFT)", "Time-to-First-Token"),
    ("Hoe groot is het contextvenster in het llama-cli commando met gedeeltelijke offloading?", "-ngl 24 -c 4096", "4096"),
    ("Hoeveel tokens laat je bij een gestandaardiseerde meting bijvoorbeeld genereren?", "(bijvoorbeeld 128 of 256 tokens)", "128"),
    ("waarom moet er ruimte tussen de grafische kaarten zitten in een server?", "voldoende fysieke tussenruimte voor airflow", "airflow"),
    ("Waarom kan een dure server vol videokaarten op termijn toch voordeliger zijn?", "levert per kilowattuur aanzienlijk meer voltooide tokens op", "kilowattuur"),
    ("Welke modelgroottes noemt het artikel middelgroot tot groot?", "(14B, 32B tot 70B parameters)", "32B"),
    ("Wat doet je hardware de hele tijd opnieuw als je een lokaal taalmodel of beeldmodel draait?", "doet je hardware steeds weer hetzelfde: matrixvermenigvuldiging", "matrixvermenigvuldiging"),
    ("Op welke twee dingen komt het voordeel van een videokaart bij lokale llm's neer?", "komt het voordeel van de GPU neer op twee zaken: parallelle rekenkracht en geheugenbandbreedte", "parallelle rekenkracht"),
    ("waar is het grafische geheugen van de AI300 behalve voor AI nog meer voor bedoeld?", "(en een beetje gamen)", "gamen"),
    ("Wat moet je eerst nakijken als je het met een AMD-kaart wil proberen?", "kijk alleen eerst even in de documentatie van je tool", "documentatie"),
]

EN_FACTS_BLIND5 = [
    ("what does the comma option do in a format spec?", "The \"','\" option signals the use of a comma for a thousands separator", "thousands separator"),
    ("when do default argument values get computed, on every call?", "the expression is evaluated once, when the function is defined", "when the function is defined"),
    ("What does the # flag put in front of a hex number when formatting?", "this option adds the respective prefix \"'0b'\", \"'0o'\", \"'0x'\", or \"'0X'\"", "0x"),
    ("which pdb command tells me the type of an expression?", "whatis expression Print the type of *expression*", "whatis"),
    ("What happens to the running program when I quit the debugger?", "Quit from the debugger. The program being executed is aborted", "aborted"),
    ("how do I see all the source code of the current function in pdb", "longlist List all source code for the current function or frame", "longlist"),
    ("My class only defines __repr__; what gets used when an informal string is needed?", "then \"__repr__()\" is also used when an “informal” string representation", "__repr__"),
    ("What does declaring __slots__ stop Python from creating for each instance?", "deny the creation of \"__dict__\"", "__dict__"),
    ("From which Python version on is the order of a dict guaranteed?", "Changed in version 3.7: Dictionary order is guaranteed to be insertion order", "3.7"),
    ("What type does the *args parameter receive the extra positional arguments in?", "receives a tuple containing the excess positional arguments", "tuple"),
    ("Since which version can a slash in a def mark positional-only parameters?", "Changed in version 3.8: The \"/\" function parameter syntax", "3.8"),
    ("How should __getattribute__ look up other attributes so it does not recurse forever?", "should always call the base class method with the same name", "base class method"),
    ("With from __future__ import annotations, how are annotations kept at runtime?", "annotations are preserved as strings at runtime", "as strings"),
    ("Which standard does Python's NaN comparison behaviour follow?", "This behavior is compliant with IEEE 754", "IEEE 754"),
    ("what does str.count return if I count an empty string?", "which is the length of the string plus one", "plus one"),
    ("Which pdb command is restart another name for?", "\"restart\" is an alias for \"run\"", "run"),
]

ABSENT_BLIND5 = [
    ("Welke processor zit er in de CORSAIR AI300?", "nl"),
    ("Hoeveel stroom verbruikt een RTX 5090 zelf onder volle belasting?", "nl"),
    ("In welk jaar is het GGUF-formaat uitgebracht?", "nl"),
    ("hoeveel tokens per seconde haalt SmolLM2 op een telefoon?", "nl"),
    ("Hoeveel geheugenkanalen heeft een AMD EPYC-processor?", "nl"),
    ("Wat kost de AGI CPU van Arm?", "nl"),
    ("Wie leidde het onderzoek van Georgia Tech naar toolverwerking?", "nl"),
    ("Hoeveel werkgeheugen kan er maximaal in een Mac Studio?", "nl"),
    ("How many breakpoints can pdb hold at the same time?", "en"),
    ("Which Python version removed the distutils module?", "en"),
    ("Who proposed adding the match statement to Python?", "en"),
    ("What separator does print() put between its arguments by default?", "en"),
    ("How much faster is looking something up in a set than in a list?", "en"),
    ("How many bytes does an empty string take in CPython?", "en"),
    ("How many digits may an int have by default before str() refuses to convert it?", "en"),
]
