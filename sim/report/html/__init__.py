"""`servesim report DIR`: one self-contained report.html for a results folder.

    folder.read(DIR)      what servesim wrote there (run, sweep or capacity), read only:
                          nothing is simulated again
    sections.*(folder)    the page's parts as HTML fragments (summary, SLO, plots, config
                          and `vllm serve` flags, warnings, the cost model's error band)
    page.render(folder)   the whole page: CSS inline, plots as base64 PNG data URIs, no
                          script and no URL outside the file
    write.write_report    report.html into DIR, atomically, replacing only its own
"""
