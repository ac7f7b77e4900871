use strict; use JSON::PP;
my %out;
for my $f (@ARGV) { local $/; open my $fh, '<', $f or die; my $t = <$fh>; my ($name) = $f =~ m{/(\w+)\.pm$};
  my ($body) = $t =~ /(sub match \{.*?\n\})/s;
  for my $var ('index', 'pairs') { if ($body =~ /state \$$var\s*=\s*(\[.*?\n?\s*\]);/s) { my $v = eval $1; die "$name $var: $@" if $@; $out{$name}{$var} = $v } } }
print JSON::PP->new->canonical->encode(\%out);
