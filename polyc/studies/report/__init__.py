"""Schedule inspection people look at: the HTML report of a compiled kernel or
model (:mod:`.html`), timelines as pictures and traces named by layer
(:mod:`.timeline`), schedule diffs (:mod:`.diff`), and the command line's targets
(:mod:`.targets`). See docs/inspection.md."""
