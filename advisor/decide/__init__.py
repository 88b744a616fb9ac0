"""decide: the verdict as data (rules over the table and the evidence) and the sentences written from it."""
