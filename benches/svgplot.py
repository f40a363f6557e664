"""Two-panel line plots as plain SVG, for the bench scripts' results
(no plotting library on the machines they run on)."""


def two_panels(path, xs, series, panels, x_label):
    """Writes `path`: one panel per (key, label) of `panels`, x over `xs`,
    a line per (name, color, {x: {key: value}}) of `series`."""
    W, H, P = 360, 240, 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{len(panels) * W}" height="{H}" '
             'font-family="sans-serif" font-size="11">']
    for panel, (key, label) in enumerate(panels):
        x0 = panel * W
        ymax = max(vals[x][key] for _, _, vals in series for x in xs) * 1.15 or 1
        xmin, xmax = xs[0], xs[-1] if xs[-1] > xs[0] else xs[0] + 1
        def px(x): return x0 + P + (x - xmin) / (xmax - xmin) * (W - 2 * P)
        def py(v): return H - P - v / ymax * (H - 2 * P)
        parts.append(f'<text x="{x0 + W / 2}" y="15" text-anchor="middle">{label} vs {x_label}</text>')
        parts.append(f'<line x1="{x0 + P}" y1="{H - P}" x2="{x0 + W - P}" y2="{H - P}" stroke="black"/>')
        parts.append(f'<line x1="{x0 + P}" y1="{P}" x2="{x0 + P}" y2="{H - P}" stroke="black"/>')
        for x in xs:
            parts.append(f'<text x="{px(x)}" y="{H - P + 14}" text-anchor="middle">{x}</text>')
        for i in range(5):
            v = ymax * i / 4
            text = f"{v:.1f}" if ymax < 10 else f"{v:.0f}"
            parts.append(f'<text x="{x0 + P - 4}" y="{py(v) + 4}" text-anchor="end">{text}</text>')
        for i, (name, color, vals) in enumerate(series):
            pts = " ".join(f"{px(x):.1f},{py(vals[x][key]):.1f}" for x in xs)
            parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
            parts.append(f'<text x="{x0 + W - P}" y="{P + 14 * i}" text-anchor="end" fill="{color}">{name}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts))
