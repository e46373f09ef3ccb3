#ifndef OVT_TESTS_DATA_TEXTS_H
#define OVT_TESTS_DATA_TEXTS_H

/* The tricky strings both tokenizer tests (test_data_bpe, test_data_sptok)
 * compare with their npm reference encoders, beside the GPL-3 text:
 * contractions, runs of spaces, newlines and tabs, digits, punctuation,
 * non-ASCII words and an emoji. */

static const char *const tricky[] = {
    "I'm sure they're here; we've seen it, you'll see, he'd know, it's 'quoted' and I'M SHOUTING'S.\n",
    "two  spaces,   three,    four\tand\ttabs \t mixed\n\n\nthree newlines\r\nCRLF\n   \n  trailing  ",
    "digits 0 12 345 6789 3.14159 1,000,000 2024-01-01 x86_64 v1.2.3 #42 $9.99 100%",
    "punctuation!!! ?? ... --- (parens) [brackets] {braces} <angle> \"quotes\" `tick` @at ~tilde ^caret |pipe \\ /",
    "caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 \xc3\x9c" "ber Stra\xc3\x9f" "e \xce\xb1\xce\xb2\xce\xb3 "
    "\xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xe2\x80\x94 "
    "\xe2\x80\x9cquoted\xe2\x80\x9d emoji \xf0\x9f\x98\x80!! \xc2\xbd \xc2\xb2",
    "''s 's 't 're 've 'm 'll 'd 'x ' s Don't DON'T rock'n'roll",
    "   leading spaces\n\n",
};

#define TRICKY_COUNT (sizeof tricky / sizeof *tricky)

#endif
