# Converts planer's test/planerText.test.coffee (a port of mailgun/talon's text tests) into
# emails/NAME.txt + want/NAME.txt pairs. Mechanical: no case is edited by hand.
import re, sys, os
src = open(sys.argv[1], encoding='utf-8').read()
out = sys.argv[2]
os.makedirs(out + '/emails', exist_ok=True); os.makedirs(out + '/want', exist_ok=True)

def heredoc(body):
    lines = body.split('\n')
    rest = [l for l in lines[1:] if l.strip()]
    ind = min((len(l) - len(l.lstrip(' ')) for l in rest), default=0)
    lines = [lines[0]] + [l[ind:] for l in lines[1:]]
    s = '\n'.join(lines)
    s = re.sub(r'\n[ \t]*$', '', s)  # coffee drops the last line if it is only indentation
    return unesc(s)

def unesc(s):
    return re.sub(r'\\(.)', lambda m: {'n': '\n', 't': '\t'}.get(m.group(1), m.group(1)), s)

tok = re.compile(r'''(?P<it>^\s*it\s+['"](?P<title>[^'"]*)['"])|(?P<assign>^\s*(?P<var>\w+)\s*=\s*(?P<q>"""|'|")(?P<val>.*?)(?P=q))|(?P<expect>expect\(planer\.extractFromPlain\((?P<arg>\w+)\)\)\.to\.equal\((?:(?P<evar>\w+)|(?P<eq>'|")(?P<elit>.*?)(?P=eq))\))''', re.S | re.M)
vars, title, n, count = {}, 'case', 0, 0
for m in tok.finditer(src):
    if m.group('it'):
        title, n = m.group('title'), 0
        vars = {}
    elif m.group('assign'):
        v = m.group('val')
        vars[m.group('var')] = heredoc(v) if m.group('q') == '"""' else unesc(v)
    elif m.group('expect'):
        arg = m.group('arg')
        if arg not in vars:
            continue
        want = vars.get(m.group('evar')) if m.group('evar') else unesc(m.group('elit'))
        if want is None:
            continue
        n += 1
        name = re.sub(r'[^a-z0-9]+', '_', title.lower()).strip('_') + ('_%d' % n if n > 1 else '')
        while os.path.exists(f'{out}/emails/{name}.txt'):
            name += '_b'
        open(f'{out}/emails/{name}.txt', 'w', encoding='utf-8').write(vars[arg] + '\n')
        open(f'{out}/want/{name}.txt', 'w', encoding='utf-8').write(want + '\n')
        count += 1
print(count, 'cases')
