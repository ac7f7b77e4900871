"""A realistic contact list for the import benches, the same for a given seed and size.

    python bench/contact_list.py OUT.csv 200000 [--seed 42]

Columns as a list exported from another tool would have them: `email`, `first_name`,
`last_name` (accented names: Zoë, Gaëlle, Müller, Łukasz ...), `city` (93 cities, some with
accents or spaces), `phone` (85% of rows, in five countries, written the ways people write
them: E.164, spaced, dashed), `signup` (a date,
YYYY-MM-DD). About one row in 2,000 is bad in a way a real list is: an address without @, a
phone number too short, a date that is not one, a row without an address. The emails are
unique (a real export has no duplicates). Every phone number is valid for phonenumbers
(`is_valid_number`), so only the bad rows are reported.
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

HEADER = ["email", "first_name", "last_name", "city", "phone", "signup"]
FIRST = ("Anna", "Zoë", "Gaëlle", "Hélène", "José", "Łukasz", "Søren", "Chloé", "Mateo", "Noémie", "Jürgen",
         "François", "Inés", "Björn", "Ángel", "Émile", "Oliver", "Amelia", "Liam", "Sofía", "Nuño", "Maëlle",
         "Jörg", "Renée", "Ciarán", "Dagný", "Zoltán", "Mia", "Noah", "Lucía", "Elif", "Çağla", "Ørjan",
         "James", "Emma", "Hugo", "Léa", "Paul", "Marie", "Luca", "Giulia", "Pedro", "Ana", "Jan", "Eva")
LAST = ("Müller", "Smith", "García", "Núñez", "Lefèvre", "Dupré", "Kowalski", "Søndergaard", "O'Brien",
        "Schröder", "Martín", "Rossi", "Bianchi", "Jones", "Brown", "Moreau", "Böhm", "Weiß", "Łęcki",
        "Fernández", "Gómez", "Dubois", "Lambert", "Köhler", "Ibáñez", "Taylor", "Wilson", "Nowak", "Öztürk",
        "Häkkinen", "Mercier", "Roux", "Fischer", "Wagner", "López", "Pérez", "Sánchez", "Clarke", "Doyle")
_CITY_NAMES = ("New York", "Los Angeles", "Chicago", "Houston", "Phoenix", "Philadelphia", "San Antonio",
               "San Diego", "Dallas", "Austin", "Seattle", "Boston", "Denver", "Miami", "Atlanta", "Portland",
               "London", "Manchester", "Birmingham", "Leeds", "Glasgow", "Liverpool", "Bristol", "Edinburgh",
               "Cardiff", "Belfast", "Paris", "Lyon", "Marseille", "Toulouse", "Nice", "Nantes", "Strasbourg",
               "Montpellier", "Bordeaux", "Lille", "Rennes", "Saint-Étienne", "Besançon", "Orléans", "Nîmes",
               "Berlin", "Hamburg", "München", "Köln", "Frankfurt am Main", "Stuttgart", "Düsseldorf",
               "Dortmund", "Essen", "Leipzig", "Bremen", "Dresden", "Nürnberg", "Lübeck", "Madrid", "Barcelona",
               "Valencia", "Sevilla", "Zaragoza", "Málaga", "Murcia", "Palma", "Bilbao", "Alicante", "Córdoba",
               "Valladolid", "Vigo", "Gijón", "A Coruña", "Cádiz", "León", "Roma", "Milano", "Napoli",
               "Torino", "Zürich", "Genève", "Wien", "Kraków", "Łódź", "Gdańsk", "Poznań", "Brno", "Praha",
               "København", "Malmö", "Göteborg", "Reykjavík", "Tromsø", "Århus", "Lisboa", "Porto")
CITIES = _CITY_NAMES[:93]
DOMAINS = ("gmail.com", "yahoo.com", "outlook.com", "hotmail.co.uk", "orange.fr", "web.de", "gmx.de",
           "telefonica.es", "icloud.com", "free.fr", "example.org", "company.co.uk", "laposte.net")
# (country code, national significant number prefixes that phonenumbers takes as valid,
# digits after the prefix, a share of the rows with a phone): US, GB, FR, DE, ES.
PHONES = (
    ("1", ("212555", "415555", "312555", "617555", "305555", "201555"), 4, 0.40),
    ("44", ("7400", "7401", "7402", "1212", "1213"), 6, 0.20),
    ("33", ("612", "623", "634", "123", "145"), 6, 0.15),
    ("49", ("1512", "1513", "1514"), 7, 0.10),
    ("34", ("612", "623", "634", "810"), 6, 0.15),
)
PHONE_SHARE = 0.85
BAD_EVERY = 2_000  # about one bad row in this many
VERSION = 3  # of the generator: a list written by another version is written again


def _phone(rnd: random.Random) -> str:
    pick = rnd.random()
    for code, prefixes, digits, share in PHONES:
        pick -= share
        if pick <= 0:
            break
    prefix = rnd.choice(prefixes)
    rest = "".join(rnd.choice("0123456789") for _ in range(digits))
    national = prefix + rest
    style = rnd.random()
    if style < 0.55:
        return f"+{code}{national}"
    if style < 0.80:
        return f"+{code} {national[:3]} {national[3:6]} {national[6:]}".strip()
    return f"+{code}-{national[:3]}-{national[3:]}"


def _email(rnd: random.Random, i: int, first: str, last: str) -> str:
    local = "".join(ch for ch in f"{first}.{last}".lower() if ch.isascii() and (ch.isalnum() or ch == "."))
    return f"{local}{i}@{rnd.choice(DOMAINS)}"


def _bad(rnd: random.Random, cells: list[str]) -> list[str]:
    kind = rnd.randrange(4)
    if kind == 0:
        cells[0] = cells[0].replace("@", " at ")
    elif kind == 1:
        cells[4] = "+33 12"
    elif kind == 2:
        cells[5] = "31/02/soon"
    else:
        cells[0] = ""  # a row without an address (the file keeps its width: every loader reads it)
    return cells


def rows(n: int, seed: int = 42):  # noqa: ANN201 - an iterator of lists of cells
    rnd = random.Random(seed)
    for i in range(n):
        first, last = rnd.choice(FIRST), rnd.choice(LAST)
        cells = [_email(rnd, i, first, last), first, last, rnd.choice(CITIES),
                 _phone(rnd) if rnd.random() < PHONE_SHARE else "",
                 f"20{rnd.randint(10, 26):02d}-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}"]
        if rnd.randrange(BAD_EVERY) == 0:
            cells = _bad(rnd, cells)
        yield cells


def write(path: Path, n: int, seed: int = 42) -> Path:
    """Write the list of `n` rows to `path` (kept when it already holds this size and seed)."""
    stamp = path.with_suffix(path.suffix + ".made")
    want = f"{n} {seed} {VERSION}"
    if path.exists() and stamp.exists() and stamp.read_text() == want:
        return path
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        writer.writerows(rows(n, seed))
    stamp.write_text(want)
    return path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("rows", type=int)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    write(args.out, args.rows, args.seed)
